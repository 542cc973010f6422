import type { Attributes, Link, SpanContext, SpanKind, TraceState } from '@opentelemetry/api';
import type { InstrumentationScope } from '@opentelemetry/core';
import type { ReadableSpan, TimedEvent } from '@opentelemetry/sdk-trace';

/**
 * Ended spans packed into one binary chunk, for a worker thread: the chunk's
 * ArrayBuffer is transferred, not cloned, and a span waiting in it is bytes,
 * not objects the garbage collector walks and copies. Only what the OTLP
 * serializers read is kept (see SpanEncoder.append); events, links and
 * attribute values other than strings, numbers and booleans (rare) travel
 * beside the chunk as plain values (`extras`).
 *
 * Span names and attribute keys are sent once per worker: the chunk holds
 * their index in a table that `strings` extends (past MAX_INTERNED distinct
 * ones, the string itself).
 */
export interface SpanChunk {
  buffer: ArrayBuffer;
  /** Bytes of `buffer` in use. */
  bytes: number;
  count: number;
  extras: unknown[];
}

/** Distinct span names and attribute keys sent by index; further ones are written out each time. */
export const MAX_INTERNED = 4096;
const NOT_INTERNED = 0xffffffff;

const HAS_PARENT = 1;
const PARENT_IS_REMOTE = 2;
const HAS_TRACE_STATE = 4;
const HAS_STATUS_MESSAGE = 8;
const HAS_EVENTS = 16;
const HAS_LINKS = 32;

const STRING = 0;
const NUMBER = 1;
const TRUE = 2;
const FALSE = 3;
const EXTRA = 4;

/** A link as plain values (its trace state as text). */
interface PlainLink {
  traceId: string;
  spanId: string;
  traceFlags: number;
  isRemote?: boolean;
  traceState?: string;
  attributes?: Attributes;
  droppedAttributesCount?: number;
}

function plainLink(link: Link): PlainLink {
  const { context } = link;
  const out: PlainLink = { traceId: context.traceId, spanId: context.spanId, traceFlags: context.traceFlags };
  if (context.isRemote !== undefined) out.isRemote = context.isRemote;
  if (context.traceState) out.traceState = context.traceState.serialize();
  if (link.attributes) out.attributes = link.attributes;
  if (link.droppedAttributesCount !== undefined) out.droppedAttributesCount = link.droppedAttributesCount;
  return out;
}

/** What the serializers call on a trace state: its `tracestate` text. */
function traceState(serialized: string): TraceState {
  return { serialize: () => serialized } as TraceState;
}

function linkOf(link: PlainLink): Link {
  const context: SpanContext = { traceId: link.traceId, spanId: link.spanId, traceFlags: link.traceFlags };
  if (link.isRemote !== undefined) context.isRemote = link.isRemote;
  if (link.traceState !== undefined) context.traceState = traceState(link.traceState);
  const out: Link = { context };
  if (link.attributes) out.attributes = link.attributes;
  if (link.droppedAttributesCount !== undefined) out.droppedAttributesCount = link.droppedAttributesCount;
  return out;
}

/** Packs ended spans into chunks (the main thread's side). */
export class SpanEncoder {
  readonly #chunkBytes: number;
  #buf: Buffer;
  #pos = 0;
  #count = 0;
  #extras: unknown[] = [];
  readonly #interned = new Map<string, number>();
  readonly #table: string[] = [];

  /** `chunkBytes`: the size a chunk starts with (it grows for spans that do not fit). */
  constructor(chunkBytes = 256 * 1024) {
    this.#chunkBytes = chunkBytes;
    this.#buf = Buffer.allocUnsafeSlow(chunkBytes);
  }

  /** Spans in the current chunk. */
  get count(): number {
    return this.#count;
  }

  /** Bytes in the current chunk. */
  get bytes(): number {
    return this.#pos;
  }

  /** Span names and attribute keys given an index so far, from index `from` on. */
  strings(from: number): string[] {
    return this.#table.slice(from);
  }

  get stringCount(): number {
    return this.#table.length;
  }

  /** The current chunk (undefined when empty); the next span starts a new one. */
  take(): SpanChunk | undefined {
    if (this.#count === 0) return undefined;
    const chunk: SpanChunk = {
      buffer: this.#buf.buffer as ArrayBuffer,
      bytes: this.#pos,
      count: this.#count,
      extras: this.#extras,
    };
    this.#buf = Buffer.allocUnsafeSlow(this.#chunkBytes);
    this.#pos = 0;
    this.#count = 0;
    this.#extras = [];
    return chunk;
  }

  /**
   * Appends `span` (its resource and scope given as ids): name, kind,
   * trace id, span id, flags, trace state, parent span id and whether it is
   * remote, start, end and duration, status, the three dropped counts,
   * events, links and attributes.
   */
  append(span: ReadableSpan, resource: number, scope: number): void {
    const context = span.spanContext();
    const parent = span.parentSpanContext;
    const { status, attributes, events, links } = span;
    let flags = 0;
    if (parent) flags |= parent.isRemote ? HAS_PARENT | PARENT_IS_REMOTE : HAS_PARENT;
    if (context.traceState) flags |= HAS_TRACE_STATE;
    if (status.message !== undefined) flags |= HAS_STATUS_MESSAGE;
    if (events.length > 0) flags |= HAS_EVENTS;
    if (links.length > 0) flags |= HAS_LINKS;
    this.#ref(span.name);
    this.#u8(span.kind);
    this.#u8(context.traceFlags);
    this.#u8(flags);
    this.#str(context.traceId);
    this.#str(context.spanId);
    if (parent) this.#str(parent.spanId);
    if (context.traceState) this.#str(context.traceState.serialize());
    this.#f64(span.startTime[0]);
    this.#f64(span.startTime[1]);
    this.#f64(span.endTime[0]);
    this.#f64(span.endTime[1]);
    this.#f64(span.duration[0]);
    this.#f64(span.duration[1]);
    this.#u8(status.code);
    if (status.message !== undefined) this.#str(status.message);
    this.#u32(span.droppedAttributesCount);
    this.#u32(span.droppedEventsCount);
    this.#u32(span.droppedLinksCount);
    this.#u32(resource);
    this.#u32(scope);
    if (events.length > 0) this.#extra(events);
    if (links.length > 0) this.#extra(links.map(plainLink));
    let n = 0;
    for (const _ in attributes) n++;
    this.#u32(n);
    for (const key in attributes) {
      this.#ref(key);
      const value = attributes[key];
      if (typeof value === 'string') {
        this.#u8(STRING);
        this.#str(value);
      } else if (typeof value === 'number') {
        this.#u8(NUMBER);
        this.#f64(value);
      } else if (typeof value === 'boolean') {
        this.#u8(value ? TRUE : FALSE);
      } else {
        this.#u8(EXTRA);
        this.#extra(value);
      }
    }
    this.#count++;
  }

  /** Makes room for `bytes` more, growing the chunk (rare: a span larger than the space left). */
  #room(bytes: number): void {
    if (this.#pos + bytes <= this.#buf.length) return;
    const next = Buffer.allocUnsafeSlow(Math.max(2 * this.#buf.length, this.#pos + bytes));
    this.#buf.copy(next, 0, 0, this.#pos);
    this.#buf = next;
  }

  #u8(value: number): void {
    this.#room(1);
    this.#buf[this.#pos++] = value;
  }

  #u32(value: number): void {
    this.#room(4);
    this.#buf.writeUInt32LE(value, this.#pos);
    this.#pos += 4;
  }

  #f64(value: number): void {
    this.#room(8);
    this.#buf.writeDoubleLE(value, this.#pos);
    this.#pos += 8;
  }

  #extra(value: unknown): void {
    this.#u32(this.#extras.length);
    this.#extras.push(value);
  }

  /** A string: its UTF-8 length, then its bytes (ASCII copied here, anything else by the encoder). */
  #str(value: string): void {
    const length = value.length;
    this.#room(4 + 3 * length);
    const buf = this.#buf;
    const start = this.#pos + 4;
    let i = 0;
    if (length <= 256) {
      for (; i < length; i++) {
        const code = value.charCodeAt(i);
        if (code >= 0x80) break;
        buf[start + i] = code;
      }
    }
    const bytes = i === length ? length : i + buf.write(value.slice(i), start + i, 'utf8');
    buf.writeUInt32LE(bytes, this.#pos);
    this.#pos = start + bytes;
  }

  /** A span name or attribute key: its index in the table, or NOT_INTERNED and the string. */
  #ref(value: string): void {
    let id = this.#interned.get(value);
    if (id === undefined && this.#table.length < MAX_INTERNED) {
      id = this.#table.length;
      this.#interned.set(value, id);
      this.#table.push(value);
    }
    if (id !== undefined) this.#u32(id);
    else {
      this.#u32(NOT_INTERNED);
      this.#str(value);
    }
  }
}

/** The spans of a chunk as the OTLP serializers (json, protobuf) and the BatchSpanProcessor read them (the worker's side). */
export function decodeSpans(
  chunk: SpanChunk,
  strings: readonly string[],
  resourceOf: (id: number) => ReadableSpan['resource'],
  scopeOf: (id: number) => InstrumentationScope,
): ReadableSpan[] {
  const buf = Buffer.from(chunk.buffer, 0, chunk.bytes);
  let pos = 0;
  const u8 = () => buf[pos++]!;
  const u32 = () => {
    const value = buf.readUInt32LE(pos);
    pos += 4;
    return value;
  };
  const f64 = () => {
    const value = buf.readDoubleLE(pos);
    pos += 8;
    return value;
  };
  const str = () => {
    const bytes = u32();
    const value = buf.toString('utf8', pos, pos + bytes);
    pos += bytes;
    return value;
  };
  const ref = () => {
    const id = u32();
    return id === NOT_INTERNED ? str() : strings[id]!;
  };
  const extra = () => chunk.extras[u32()];

  const spans: ReadableSpan[] = [];
  for (let k = 0; k < chunk.count; k++) {
    const name = ref();
    const kind = u8() as SpanKind;
    const traceFlags = u8();
    const flags = u8();
    const traceId = str();
    const context: SpanContext = { traceId, spanId: str(), traceFlags };
    const parent: SpanContext | undefined =
      flags & HAS_PARENT
        ? { traceId, spanId: str(), traceFlags: 0, isRemote: (flags & PARENT_IS_REMOTE) !== 0 }
        : undefined;
    if (flags & HAS_TRACE_STATE) context.traceState = traceState(str());
    const startTime: [number, number] = [f64(), f64()];
    const endTime: [number, number] = [f64(), f64()];
    const duration: [number, number] = [f64(), f64()];
    const code = u8();
    const status = flags & HAS_STATUS_MESSAGE ? { code, message: str() } : { code };
    const droppedAttributesCount = u32();
    const droppedEventsCount = u32();
    const droppedLinksCount = u32();
    const resource = resourceOf(u32());
    const instrumentationScope = scopeOf(u32());
    const events = flags & HAS_EVENTS ? (extra() as TimedEvent[]) : [];
    const links = flags & HAS_LINKS ? (extra() as PlainLink[]).map(linkOf) : [];
    const attributes: Attributes = {};
    for (let n = u32(); n > 0; n--) {
      const key = ref();
      const tag = u8();
      attributes[key] =
        tag === STRING
          ? str()
          : tag === NUMBER
            ? f64()
            : tag === TRUE
              ? true
              : tag === FALSE
                ? false
                : (extra() as Attributes[string]);
    }
    spans.push({
      name,
      kind,
      spanContext: () => context,
      parentSpanContext: parent,
      startTime,
      endTime,
      duration,
      status,
      attributes,
      links,
      events,
      ended: true,
      resource,
      instrumentationScope,
      droppedAttributesCount,
      droppedEventsCount,
      droppedLinksCount,
    });
  }
  return spans;
}
