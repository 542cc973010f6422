import { Worker } from 'node:worker_threads';
import { type Attributes, diag, TraceFlags } from '@opentelemetry/api';
import { globalErrorHandler, type InstrumentationScope } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace';
import { type SpanChunk, SpanEncoder } from './span-codec.ts';

/** Where spans go: the OTLP traces URL and its encoding. */
export interface SpanExportTarget {
  url: string;
  protocol: 'http/json' | 'http/protobuf';
}

export interface PlainResource {
  attributes: Attributes;
  schemaUrl?: string;
}

export interface PlainError {
  name: string;
  message: string;
}

/** Main thread -> worker. */
export type ToWorker =
  | {
      type: 'spans';
      chunk: SpanChunk;
      /** Span names and attribute keys the chunk refers to by index, new to the worker (appended to its table). */
      strings?: string[];
      resources?: [number, PlainResource][];
      scopes?: [number, InstrumentationScope][];
    }
  | { type: 'flush' | 'shutdown'; id: number };

/** Worker -> main thread: a request done, or whether an export is in flight. */
export type FromWorker = { type: 'done'; id: number; error?: PlainError } | { type: 'busy'; busy: boolean };

/**
 * Spans are posted to the worker 512 at a time (its processor's export batch)
 * or 1 s after the first of them ended, whichever comes first: a message has
 * a fixed cost (a worker woken up) many times a span's.
 */
const POST_SPANS = 512;
const POST_DELAY_MS = 1000;

function errorOf(plain: PlainError): Error {
  const error = new Error(plain.message);
  error.name = plain.name;
  return error;
}

/** One worker thread: what it was sent (strings, resources, scopes), its requests not yet done. */
interface Running {
  worker: Worker;
  strings: number;
  sent: Set<number>;
  requests: Map<number, { resolve(): void; reject(error: Error): void }>;
  /** An export is in flight in the worker. */
  busy: boolean;
  /** Set once the worker is gone (its requests were rejected with it). */
  gone?: Error;
}

/**
 * The BatchSpanProcessor, run in a worker thread with the SDK's OTLP trace
 * exporter for the target's protocol (span-export-worker.ts).
 *
 * On this thread a sampled span that ends is packed into a binary chunk
 * (what the OTLP serializers read of it, see span-codec.ts) and released;
 * chunks are transferred to the worker (see POST_SPANS). The worker rebuilds them and hands them to its BatchSpanProcessor: the same
 * batches (512), delay (5 s), queue limit (2048) and timeouts as the
 * processor on this thread had, and the same encoding and HTTP transport. A
 * consumer that makes one span per record spends most of its telemetry time
 * in that encoding, and in collecting the span objects that waited for it:
 * neither happens on the service's thread any more.
 *
 * `forceFlush` and `shutdown` post what is pending and wait for the
 * worker's processor to do the same. The worker starts with the first span
 * and again with the next after it died (the spans it held are lost, as
 * with an exporter that crashed). It keeps the process alive only while an
 * export is in flight, as the HTTP request would on this thread.
 */
export class WorkerBatchSpanProcessor implements SpanProcessor {
  readonly #target: SpanExportTarget;
  #running: Running | undefined;
  readonly #encoder = new SpanEncoder();
  #timer: NodeJS.Timeout | undefined;
  readonly #resources = new Map<Resource, number>();
  readonly #scopes = new Map<InstrumentationScope, number>();
  /** Data of each resource and scope id, for a worker that has not been sent it yet. */
  readonly #known = new Map<number, { resource: PlainResource } | { scope: InstrumentationScope }>();
  #lastId = 0;
  #lastRequest = 0;
  /** Resources whose asynchronous attributes are not settled yet: spans wait for them. */
  readonly #settling = new Set<Promise<void>>();
  #shutdown: Promise<void> | undefined;

  constructor(target: SpanExportTarget) {
    this.#target = { url: target.url, protocol: target.protocol };
  }

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (this.#shutdown) return;
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    this.#append(span);
    if (this.#encoder.count >= POST_SPANS) this.#post();
    else if (!this.#timer) {
      this.#timer = setTimeout(() => this.#post(), POST_DELAY_MS);
      this.#timer.unref();
    }
  }

  /** Resolves once the worker has exported every span ended so far (rejects as the SDK's processor would). */
  async forceFlush(): Promise<void> {
    if (this.#shutdown) return this.#shutdown;
    await this.#settled();
    this.#post();
    if (this.#running && !this.#running.gone) await this.#request(this.#running, 'flush');
  }

  /** Exports what is pending, shuts the worker's processor and exporter down, ends the worker. Idempotent. */
  shutdown(): Promise<void> {
    this.#shutdown ??= this.#close();
    return this.#shutdown;
  }

  async #close(): Promise<void> {
    await this.#settled();
    this.#post();
    const running = this.#running;
    this.#running = undefined;
    if (!running || running.gone) return;
    try {
      await this.#request(running, 'shutdown');
    } finally {
      await running.worker.terminate();
    }
  }

  async #settled(): Promise<void> {
    while (this.#settling.size > 0) await Promise.all(this.#settling);
  }

  /** Posts the spans ended so far, with the strings, resources and scopes new to the worker. */
  #post(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#encoder.count === 0 || this.#settling.size > 0) return;
    const chunk = this.#encoder.take()!;
    const running = this.#start();
    const message: ToWorker = { type: 'spans', chunk };
    const strings = this.#encoder.stringCount;
    if (running.strings < strings) message.strings = this.#encoder.strings(running.strings);
    const resources: [number, PlainResource][] = [];
    const scopes: [number, InstrumentationScope][] = [];
    for (const [id, known] of this.#known) {
      if (running.sent.has(id)) continue;
      if ('resource' in known) resources.push([id, known.resource]);
      else scopes.push([id, known.scope]);
    }
    if (resources.length > 0) message.resources = resources;
    if (scopes.length > 0) message.scopes = scopes;
    try {
      running.worker.postMessage(message, [chunk.buffer]);
    } catch (err) {
      // A value a message cannot carry: these spans are lost, as with an export that failed.
      globalErrorHandler(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    running.strings = strings;
    for (const [id] of resources) running.sent.add(id);
    for (const [id] of scopes) running.sent.add(id);
  }

  #request(running: Running, type: 'flush' | 'shutdown'): Promise<void> {
    const id = ++this.#lastRequest;
    return new Promise<void>((resolve, reject) => {
      running.requests.set(id, { resolve, reject });
      this.#ref(running);
      running.worker.postMessage({ type, id } satisfies ToWorker);
    });
  }

  /** The worker holds the process open while it exports or a request waits on it. */
  #ref(running: Running): void {
    if (running.busy || running.requests.size > 0) running.worker.ref();
    else running.worker.unref();
  }

  #start(): Running {
    if (this.#running && !this.#running.gone) return this.#running;
    const worker = new Worker(new URL('./span-export-worker.ts', import.meta.url), { workerData: this.#target });
    const running: Running = { worker, strings: 0, sent: new Set(), requests: new Map(), busy: false };
    this.#ref(running);
    worker.on('message', (message: FromWorker) => {
      if (message.type === 'busy') running.busy = message.busy;
      else {
        const request = running.requests.get(message.id);
        running.requests.delete(message.id);
        if (message.error) request?.reject(errorOf(message.error));
        else request?.resolve();
      }
      this.#ref(running);
    });
    const fail = (error: Error) => {
      if (running.gone) return;
      running.gone = error;
      diag.error('ctxflow telemetry: the span export worker stopped', error);
      for (const request of running.requests.values()) request.reject(error);
      running.requests.clear();
    };
    worker.on('error', (err) => fail(err instanceof Error ? err : new Error(String(err))));
    worker.on('exit', (code) => fail(new Error(`span export worker exited with code ${code}`)));
    this.#running = running;
    return running;
  }

  /** Packs `span` into the current chunk, with the ids of its resource and scope. */
  #append(span: ReadableSpan): void {
    let resource = this.#resources.get(span.resource);
    if (resource === undefined) {
      resource = ++this.#lastId;
      this.#resources.set(span.resource, resource);
      this.#learnResource(resource, span.resource);
    }
    const instrumentationScope = span.instrumentationScope;
    let scope = this.#scopes.get(instrumentationScope);
    if (scope === undefined) {
      scope = ++this.#lastId;
      this.#scopes.set(instrumentationScope, scope);
      this.#known.set(scope, { scope: { ...instrumentationScope } });
    }
    this.#encoder.append(span, resource, scope);
  }

  /** A resource's attributes as exported: once its asynchronous attributes settled (spans are held until then). */
  #learnResource(id: number, resource: Resource): void {
    const record = () => {
      const plain: PlainResource = { attributes: resource.attributes };
      if (resource.schemaUrl !== undefined) plain.schemaUrl = resource.schemaUrl;
      this.#known.set(id, { resource: plain });
    };
    if (!resource.asyncAttributesPending || !resource.waitForAsyncAttributes) {
      record();
      return;
    }
    const settling: Promise<void> = resource
      .waitForAsyncAttributes()
      .catch(globalErrorHandler)
      .then(() => {
        record();
        this.#settling.delete(settling);
        if (this.#settling.size === 0) this.#post();
      });
    this.#settling.add(settling);
  }
}
