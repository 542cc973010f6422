/**
 * Stoplight Prism (its library API, in proxy mode) in front of a server, behind a recorder that
 * keeps every exchange with what Prism reported of it (the `sl-violations` header, or an answer
 * Prism gave itself), and the operation of the OpenAPI document each request is for.
 *
 * Prism runs without `--errors`: every request reaches the server, so the server's own refusals
 * (401, 400, 413, ...) are validated against the document too, and a request the document calls
 * invalid is reported as a request violation instead of being answered 422 by Prism. A path with
 * a malformed %-escape goes to a second Prism that does not validate requests: Prism's request
 * validator throws on it (URIError, an unhandled rejection, and no answer); answers are still
 * validated.
 */
import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLogger } from '@stoplight/prism-core';
import { getHttpOperationsFromSpec } from '@stoplight/prism-http';
import { createServer as createPrismServer } from '@stoplight/prism-http-server';

/** What a request is sent to show; the recorder reads it from this header and does not pass it on. */
export const EXPECT_HEADER = 'x-contract-expect';
export type Expectation = 'request-violation' | 'unknown-route';

export interface Violation {
  location: string[];
  severity: string;
  code?: string | number;
  message: string;
}

export interface Exchange {
  method: string;
  /** As sent: path and query, escapes untouched. */
  url: string;
  /** Whether the request carried a body. */
  withBody: boolean;
  /** Whether Prism validated the request (not for a path with a malformed %-escape). */
  requestValidated: boolean;
  status: number;
  /** `METHOD /path/{param}` of the document's operation the request is for. */
  operation: string | undefined;
  violations: Violation[];
  /** Prism's own answer (application/problem+json), when it gave one. */
  prismAnswer?: string;
  expect?: Expectation;
}

export type OpenApiDocument = {
  paths: Record<string, Record<string, { operationId?: string; responses: Record<string, unknown> }>>;
} & Record<string, unknown>;

interface DocumentOperation {
  key: string;
  method: string;
  /** The document's path template. */
  path: string;
  pattern: RegExp;
  statuses: string[];
}

/** The document's operations, each with a pattern for its path template. */
export function documentOperations(doc: OpenApiDocument): DocumentOperation[] {
  const operations: DocumentOperation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    const source = path
      .split(/(\{[^}]+\})/)
      .map((part) => (/^\{[^}]+\}$/.test(part) ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('');
    for (const [method, operation] of Object.entries(methods)) {
      operations.push({
        key: `${method.toUpperCase()} ${path}`,
        method: method.toUpperCase(),
        path,
        pattern: new RegExp(`^${source}$`),
        statuses: Object.keys(operation.responses),
      });
    }
  }
  // Literal segments first: `/inspector/app.js` before a template that would match it.
  return operations.sort((a, b) => (a.key.includes('{') ? 1 : 0) - (b.key.includes('{') ? 1 : 0));
}

export function operationOf(operations: DocumentOperation[], method: string, url: string) {
  const path = url.split('?')[0]!;
  return operations.find((o) => o.method === method.toUpperCase() && o.pattern.test(path));
}

/** Whether a status is one the operation documents (exactly, or by a `4XX`-style range). */
export function documents(operation: DocumentOperation, status: number): boolean {
  const code = String(status);
  return operation.statuses.some((s) => s === code || s.toUpperCase() === `${code[0]}XX` || s === 'default');
}

function hasMalformedEscape(url: string): boolean {
  try {
    decodeURIComponent(url.split('?')[0]!);
    return false;
  } catch {
    return true;
  }
}

function readBody(stream: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}

function parseViolations(header: string | string[] | undefined): Violation[] {
  if (header === undefined) return [];
  const text = Array.isArray(header) ? header.join(',') : header;
  try {
    return JSON.parse(text) as Violation[];
  } catch {
    // Prism cuts a header over 8 KiB ("Too many violations! ...").
    return [{ location: ['response'], severity: 'Error', message: text.slice(0, 300) }];
  }
}

export interface ValidatingProxy {
  /** The recorder's base URL: point clients here. */
  url: string;
  exchanges: Exchange[];
  close(): Promise<void>;
}

/** Prism over `doc` in front of `upstream`, behind the recorder, all on 127.0.0.1, ports chosen by the system. */
export async function startValidatingProxy(doc: OpenApiDocument, upstream: string): Promise<ValidatingProxy> {
  const prismOperations = await getHttpOperationsFromSpec(structuredClone(doc));
  const logger = createLogger('PRISM', { level: 'silent' });
  const prism = (validateRequest: boolean) =>
    createPrismServer(prismOperations, {
      cors: false,
      components: { logger },
      config: {
        isProxy: true,
        upstream: new URL(upstream),
        upstreamProxy: undefined,
        validateRequest,
        validateResponse: true,
        checkSecurity: true,
        errors: false,
        mock: { dynamic: false },
      },
    });
  const validating = prism(true);
  const unvalidated = prism(false);
  const validatingUrl = new URL(await validating.listen(0, '127.0.0.1'));
  const unvalidatedUrl = new URL(await unvalidated.listen(0, '127.0.0.1'));
  const operations = documentOperations(doc);
  const exchanges: Exchange[] = [];

  const recorder = createServer(async (req, res) => {
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const expect = req.headers[EXPECT_HEADER] as Expectation | undefined;
    const body = await readBody(req);
    const requestValidated = !hasMalformedEscape(url);
    const target = requestValidated ? validatingUrl : unvalidatedUrl;
    const headers: Record<string, string | string[] | undefined> = { ...req.headers, host: target.host };
    delete headers[EXPECT_HEADER];
    const forwarded = httpRequest(
      { host: target.hostname, port: target.port, method, path: url, headers },
      (answer) => {
        void readBody(answer).then((text) => {
          const status = answer.statusCode ?? 0;
          const problem = String(answer.headers['content-type'] ?? '').startsWith('application/problem+json');
          exchanges.push({
            method,
            url,
            withBody: body.length > 0,
            requestValidated,
            status,
            operation: operationOf(operations, method, url)?.key,
            violations: parseViolations(answer.headers['sl-violations']),
            ...(problem ? { prismAnswer: text.toString('utf8').slice(0, 500) } : {}),
            ...(expect ? { expect } : {}),
          });
          res.writeHead(status, answer.headers);
          res.end(text);
        });
      },
    );
    forwarded.on('error', (err) => {
      exchanges.push({
        method,
        url,
        withBody: body.length > 0,
        requestValidated,
        status: 0,
        operation: undefined,
        violations: [],
        prismAnswer: err.message,
      });
      res.writeHead(502).end();
    });
    forwarded.end(body);
  });
  await new Promise<void>((resolve) => recorder.listen(0, '127.0.0.1', resolve));
  const { port } = recorder.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    exchanges,
    async close() {
      recorder.closeAllConnections();
      await new Promise<void>((resolve) => recorder.close(() => resolve()));
      await validating.close();
      await unvalidated.close();
    },
  };
}

/**
 * Every disagreement the exchanges show, one line each with how often it occurred: a violation Prism
 * reported of an answer, a status the operation does not document, a request violation of a request
 * sent as valid, a request sent as invalid that the document accepts, an answer Prism gave itself.
 */
export function findings(doc: OpenApiDocument, exchanges: readonly Exchange[]): string[] {
  const operations = documentOperations(doc);
  const counts = new Map<string, number>();
  const add = (line: string) => counts.set(line, (counts.get(line) ?? 0) + 1);
  for (const ex of exchanges) {
    const operation = ex.operation ? operations.find((o) => o.key === ex.operation) : undefined;
    const label = `${ex.operation ?? `${ex.method} ${ex.url.split('?')[0]}`} -> ${ex.status}`;
    if (ex.prismAnswer !== undefined) add(`${label}: Prism answered itself: ${ex.prismAnswer}`);
    if (!operation) {
      if (ex.expect !== 'unknown-route') add(`${label}: no operation of the document is this request's`);
    } else if (!documents(operation, ex.status)) {
      add(`${label}: status ${ex.status} not documented (documented: ${operation.statuses.join(', ')})`);
    }
    const requestViolations = ex.violations.filter(
      (v) => v.location[0] === 'request' && v.message !== 'Selected route not found',
    );
    for (const v of ex.violations) {
      if (v.location[0] === 'response') add(`${label}: ${v.severity} ${v.location.join('.')}: ${v.message}`);
    }
    if (ex.expect === 'request-violation') {
      if (requestViolations.length === 0) add(`${label}: the document accepts this request the server refused`);
    } else {
      for (const v of requestViolations) add(`${label}: request sent as valid: ${v.location.join('.')}: ${v.message}`);
    }
  }
  return [...counts].map(([line, n]) => (n > 1 ? `${line} (x${n})` : line)).sort();
}
