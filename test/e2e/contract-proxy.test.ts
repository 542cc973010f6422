/**
 * The served `/openapi.json` and the server agree (a third-party validating proxy over real
 * traffic reports nothing): Stoplight Prism, in proxy mode over the document the
 * embedded app serves, in front of that app, sees the walkthrough, the Contract v2 flows,
 * `@ctxflow/client`, the examples and typical refusals. Every violation Prism reports, every status
 * an operation does not document, fails the test, listed. Then the validator must be able to fail:
 * copies of the document with one planted wrong answer each, over the same traffic, must be
 * reported with exactly that; and a copy with every schema made unsatisfiable must be reported on
 * every body (Prism skips a schema it cannot compile without a word: a silent validator would pass
 * the first test).
 */
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refusals } from '../support/contract-refusals.ts';
import { clientCalls, contractFlows, examples, type TrafficTarget, walkthrough } from '../support/contract-traffic.ts';
import {
  documentOperations,
  type Exchange,
  findings,
  type OpenApiDocument,
  startValidatingProxy,
} from '../support/validating-proxy.ts';

const API_KEY = 'proxy-key';
const TENANT = 'tenant-proxy';
const FEED_SECRET = 'demo-secret';

let embedded: EmbeddedApp;
let upstream = '';
let served: OpenApiDocument;

beforeAll(async () => {
  embedded = await buildEmbeddedApp({
    // The feed secret names the tenant whose subscriptions its deliveries reach.
    config: {
      apiKeys: new Map([[API_KEY, TENANT]]),
      secrets: {
        generic: [{ tenant: TENANT, secret: FEED_SECRET }],
        incidentio: [{ tenant: TENANT, secret: FEED_SECRET }],
        servicenow: [{ tenant: TENANT, secret: FEED_SECRET }],
      },
    },
  });
  upstream = await embedded.app.listen({ port: 0, host: '127.0.0.1' });
  served = (await (await fetch(`${upstream}/openapi.json`)).json()) as OpenApiDocument;
});
afterAll(async () => embedded?.close());

/** The whole traffic through Prism over `doc`: what the recorder kept. */
async function traffic(doc: OpenApiDocument): Promise<Exchange[]> {
  const proxy = await startValidatingProxy(doc, upstream);
  try {
    const target: TrafficTarget = { url: proxy.url, apiKey: API_KEY, feedSecret: FEED_SECRET };
    await walkthrough(target);
    await contractFlows(target);
    await refusals(target);
    await clientCalls(target);
    await examples(target);
    return proxy.exchanges;
  } finally {
    await proxy.close();
  }
}

let baseline: Exchange[] = [];

describe('the served /openapi.json and the server agree (Prism in proxy mode)', () => {
  it('every exchange of the walkthrough, the v2 flows, the client, the examples and the refusals: no violation, no undocumented status', async () => {
    await baselineTraffic();
    // The traffic reached every operation of the document.
    const reached = new Set(baseline.map((ex) => ex.operation));
    const operations = Object.entries(served.paths).flatMap(([path, methods]) =>
      Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(operations.filter((op) => !reached.has(op))).toEqual([]);
    expect(findings(served, baseline)).toEqual([]);
  }, 90_000);

  it('a copy whose POST /sessions 201 says sessionId is an integer: Prism reports exactly that, on the same traffic', async () => {
    const planted = structuredClone(served) as any;
    // A copy of the answer's schema: the shared component would plant it in other answers too.
    const created = planted.paths['/sessions'].post.responses['201'].content['application/json'];
    const ref = created.schema.$ref as string | undefined;
    created.schema = structuredClone(ref ? planted.components.schemas[ref.split('/').at(-1)!] : created.schema);
    created.schema.properties.sessionId = { type: 'integer' };
    expect(await plantedFindings(planted)).toEqual([
      'POST /sessions -> 201: Error response.body.sessionId: Response body property sessionId must be integer',
    ]);
  }, 90_000);

  it('a copy where GET /agents/{agentId} no longer documents its 404: Prism and the status check report exactly that', async () => {
    const planted = structuredClone(served) as any;
    delete planted.paths['/agents/{agentId}'].get.responses['404'];
    expect(await plantedFindings(planted)).toEqual([
      expect.stringMatching(
        /^GET \/agents\/\{agentId\} -> 404: Warning response: Unable to match the returned status code with those defined in the document: [0-9,]+$/,
      ),
      expect.stringMatching(/^GET \/agents\/\{agentId\} -> 404: status 404 not documented \(documented: [0-9, ]+\)$/),
    ]);
  }, 90_000);

  it('every schema the traffic meets is one Prism compiled: made unsatisfiable, each request body and answer is reported', async () => {
    // `allOf: [S, { not: {} }]` fails whatever S says, unless S cannot be compiled: then Prism
    // skips the whole schema and reports nothing.
    const never = structuredClone(served) as any;
    for (const methods of Object.values(never.paths) as any[]) {
      for (const operation of Object.values(methods) as any[]) {
        const contents = [
          operation.requestBody?.content ?? {},
          ...Object.values(operation.responses).map((r: any) => r.content ?? {}),
        ];
        for (const content of contents) {
          for (const media of Object.values(content) as any[]) media.schema = { allOf: [media.schema, { not: {} }] };
        }
      }
    }
    const operations = documentOperations(served);
    const silent: string[] = [];
    for (const ex of await traffic(never)) {
      const operation = operations.find((o) => o.key === ex.operation);
      if (!operation) continue;
      const { method, path } = operation;
      const documented = never.paths[path][method.toLowerCase()];
      const label = `${ex.operation} -> ${ex.status}`;
      const reported = (where: string) =>
        ex.violations.some((v) => v.location[0] === where && v.location[1] === 'body');
      // A body of a media type the operation does not take is reported as such (415), not validated.
      const otherMedia = ex.violations.some((v) => v.location[0] === 'request' && v.code === 415);
      if (documented.responses[ex.status]?.content && !reported('response')) silent.push(`${label}: answer`);
      if (ex.withBody && ex.requestValidated && documented.requestBody && !otherMedia && !reported('request')) {
        silent.push(`${label}: request body`);
      }
    }
    expect([...new Set(silent)].sort()).toEqual([]);
  }, 90_000);
});

/** What the same traffic shows over `planted` and not over the served document (nothing may vanish). */
async function plantedFindings(planted: OpenApiDocument): Promise<string[]> {
  const before = new Set(findings(served, await baselineTraffic()).map(stripCount));
  const after = new Set(findings(planted, await traffic(planted)).map(stripCount));
  expect([...before].filter((line) => !after.has(line))).toEqual([]);
  return [...after].filter((line) => !before.has(line));
}

async function baselineTraffic(): Promise<Exchange[]> {
  if (baseline.length === 0) baseline = await traffic(served);
  return baseline;
}

function stripCount(line: string): string {
  return line.replace(/ \(x\d+\)$/, '');
}
