/**
 * A bounded schema-driven fuzz of every operation of the served `/openapi.json`: about 30 requests
 * each, made from the operation's parameter and body schemas (json-schema-faker values, fast-check
 * plans, one fixed seed), valid and mutated (wrong types, missing required fields, extra fields,
 * huge strings, null, bad %-escapes in path parameters, wrong content types, with and without the
 * bearer key), plus one oversize body and one oversize header per operation. Every answer: no 5xx,
 * a status the document lists for the operation, an error in the error form with a registered code
 * of that status, a body of the documented schema and media type.
 *
 * The seed is printed at the start and in failures; `CTXFLOW_FUZZ_SEED=<n>` replays a run.
 */
import { createHmac } from 'node:crypto';
import { errorCodes } from '@ctxflow/contracts';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { Ajv2020 } from 'ajv/dist/2020.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRequest, type Operation, planArbitrary, type RealIds, standalone } from '../support/schema-requests.ts';
import { documents, type OpenApiDocument } from '../support/validating-proxy.ts';

const SEED = Number(process.env.CTXFLOW_FUZZ_SEED ?? 20_260_801);
const REQUESTS_PER_OPERATION = 30;
const API_KEY = 'fuzz-key';
const TENANT = 'tenant-fuzz';
const FEED_SECRET = 'fuzz-secret';

let embedded: EmbeddedApp;
let base = '';
let doc: OpenApiDocument & { components: { schemas: Record<string, unknown> } };

beforeAll(async () => {
  console.log(`contract fuzz: seed ${SEED} (replay with CTXFLOW_FUZZ_SEED=${SEED})`);
  embedded = await buildEmbeddedApp({
    config: { apiKeys: new Map([[API_KEY, TENANT]]), secrets: { generic: [{ tenant: TENANT, secret: FEED_SECRET }] } },
  });
  base = await embedded.app.listen({ port: 0, host: '127.0.0.1' });
  doc = (await (await fetch(`${base}/openapi.json`)).json()) as typeof doc;
});
afterAll(async () => embedded?.close());

async function send(method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body ?? {}),
  });
  if (!response.ok) throw new Error(`set-up ${method} ${path}: ${response.status} ${await response.text()}`);
  return response.status === 204 ? undefined : response.json();
}

/** A fresh agent and session with a step and two gated calls: the real ids a plan may use. */
async function fixtures(): Promise<RealIds> {
  const { agentId } = await send('POST', '/agents', {
    context: 'Fuzzed agent.',
    tools: [{ name: 'ask', client: true }, { name: 'refund', needsApproval: true }, { name: 'search' }],
  });
  const { sessionId } = await send('POST', '/sessions', { agentId });
  await send('POST', `/sessions/${sessionId}/messages`, { role: 'user', content: 'Hi' });
  const { stepId } = await send('POST', `/sessions/${sessionId}/steps`, {});
  const calls = [
    { callId: 'call-ask', name: 'ask', arguments: '{}' },
    { callId: 'call-refund', name: 'refund', arguments: '{}' },
  ];
  await send('POST', `/sessions/${sessionId}/messages`, { role: 'assistant', content: '', toolCalls: calls });
  for (const { callId, name } of calls) await send('POST', `/sessions/${sessionId}/tool-calls`, { callId, name });
  let n = 0;
  return {
    agentId: () => agentId,
    sessionId: () => sessionId,
    stepId: () => stepId,
    callId: () => calls[n++ % 2]!.callId,
  };
}

function operationsOf(document: typeof doc): Operation[] {
  return Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]: [string, any]) => ({
      key: `${method.toUpperCase()} ${path}`,
      method: method.toUpperCase(),
      path,
      parameters: op.parameters ?? [],
      bodySchema: op.requestBody?.content?.['application/json']?.schema,
    })),
  );
}

const ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: false });
const validators = new Map<string, ReturnType<typeof ajv.compile>>();

/** What is wrong with one answer, by the document. */
function problems(operation: Operation, status: number, contentType: string, text: string): string[] {
  const out: string[] = [];
  if (status >= 500) out.push('a 5xx answer');
  const documented = doc.paths[operation.path]![operation.method.toLowerCase()]!;
  const op = {
    key: operation.key,
    method: operation.method,
    path: operation.path,
    pattern: /./,
    statuses: Object.keys(documented.responses),
  };
  if (!documents(op, status)) out.push(`status ${status} not documented (documented: ${op.statuses.join(', ')})`);
  const media = contentType.split(';')[0]!.trim();
  let body: any;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {}
  if (status >= 400) {
    const error = body?.error;
    const code = error?.code as keyof typeof errorCodes;
    if (media !== 'application/json' || typeof error !== 'object' || Object.keys(body).length !== 1) {
      out.push(`not the error form: ${media} ${text.slice(0, 120)}`);
    } else if (!(code in errorCodes)) {
      out.push(`unregistered code ${String(code)}`);
    } else {
      if (errorCodes[code].status !== status)
        out.push(`code ${code} is ${errorCodes[code].status}, answered ${status}`);
      if (typeof error.message !== 'string' || error.retryable !== errorCodes[code].retryable) {
        out.push(`code ${code}: message or retryable wrong: ${text.slice(0, 120)}`);
      }
      const extra = Object.keys(error).filter((k) => !['code', 'message', 'retryable', 'details'].includes(k));
      if (extra.length > 0) out.push(`error fields not in the form: ${extra.join(', ')}`);
    }
  }
  const content = (documented.responses[String(status)] as any)?.content as
    | Record<string, { schema: unknown }>
    | undefined;
  if (content && text !== '') {
    if (!Object.keys(content).includes(media))
      out.push(`media type ${media} not documented (${Object.keys(content).join(', ')})`);
    else if (media === 'application/json') {
      const key = `${operation.key} ${status}`;
      if (!validators.has(key))
        validators.set(key, ajv.compile(standalone(content[media]!.schema, doc.components.schemas)));
      const validate = validators.get(key)!;
      if (!validate(body)) out.push(`answer breaks its schema: ${ajv.errorsText(validate.errors)}`);
    }
  }
  return out;
}

describe(`schema-driven fuzz of every operation (seed ${SEED})`, () => {
  it(`${REQUESTS_PER_OPERATION} requests an operation, valid and mutated, an oversize body and header each: no 5xx, only documented statuses, errors in the error form`, async () => {
    // One line a problem of an operation's status, with how often and the first request that showed it.
    const found = new Map<string, { n: number; example: string }>();
    const operations = operationsOf(doc);
    for (const [i, operation] of operations.entries()) {
      const ids = await fixtures();
      const plans = fc.sample(planArbitrary, { seed: SEED + i, numRuns: REQUESTS_PER_OPERATION });
      const requests = plans.map((plan, j) => ({
        label: `auth=${plan.auth} path=${plan.path} query=${plan.query} body=${plan.body}`,
        ...buildRequest(operation, plan, SEED * 100 + i * REQUESTS_PER_OPERATION + j, {
          components: doc.components.schemas,
          ids,
          apiKey: API_KEY,
        }),
      }));
      const real = buildRequest(
        operation,
        { ...plans[0]!, auth: 'key', path: 'real', query: 'none', body: 'valid' },
        SEED,
        {
          components: doc.components.schemas,
          ids,
          apiKey: API_KEY,
        },
      );
      if (operation.method !== 'GET') {
        const huge = JSON.stringify({ content: 'o'.repeat(4.5 * 1024 * 1024) });
        requests.push({
          ...real,
          label: 'oversize body',
          headers: { ...real.headers, 'content-type': 'application/json' },
          body: huge,
          describe: '4.5 MiB',
        });
      }
      requests.push({
        ...real,
        label: 'oversize header',
        headers: { ...real.headers, 'x-padding': 'p'.repeat(20 * 1024) },
      });
      for (const request of requests) {
        if (
          operation.path === '/feeds/generic' &&
          typeof request.body === 'string' &&
          request.headers.authorization?.endsWith(API_KEY)
        ) {
          // A feed's credential is its signature: a request "with the key" is signed.
          const at = Math.floor(Date.now() / 1000);
          request.headers['x-ctxflow-timestamp'] = String(at);
          request.headers['x-ctxflow-signature'] =
            `sha256=${createHmac('sha256', FEED_SECRET).update(`${at}.${request.body}`).digest('hex')}`;
        }
        let status = 0;
        let contentType = '';
        let text = '';
        try {
          const response = await fetch(`${base}${request.path}`, {
            method: operation.method,
            headers: request.headers,
            ...(request.body === undefined ? {} : { body: request.body }),
            signal: AbortSignal.timeout(10_000),
          });
          status = response.status;
          contentType = response.headers.get('content-type') ?? '';
          // A followed stream does not end: its status and media type are the answer.
          if (contentType.startsWith('text/event-stream')) await response.body?.cancel();
          else text = await response.text();
        } catch (err) {
          text = `no answer: ${(err as Error).cause ?? (err as Error).message}`;
        }
        const issues = status === 0 ? [text] : problems(operation, status, contentType, text);
        for (const issue of issues) {
          const line = `${operation.key} -> ${status}: ${issue}`;
          const seen = found.get(line) ?? {
            n: 0,
            example: `${request.label} ${request.path.slice(0, 80)} ${request.describe.slice(0, 80)}`,
          };
          found.set(line, { ...seen, n: seen.n + 1 });
        }
      }
    }
    const listed = [...found].map(([line, { n, example }]) => `${line} (x${n}; e.g. ${example})`).sort();
    expect(listed, `contract fuzz, seed ${SEED}`).toEqual([]);
  }, 120_000);
});
