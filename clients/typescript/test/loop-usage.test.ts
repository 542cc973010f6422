/**
 * `runLoop` reports each step's provider usage itself, and the hit ratio ctxflow shows is the
 * provider's: a stand-in provider that caches as the providers do (longest common prefix per cache
 * key, reported in its `usage`: test/support/provider-stand-in.ts) behind the official SDKs, the
 * embedded app in-process. A runtime that reorders the tools it sends breaks the prefix: ctxflow
 * flags the step where it did (the inspection, the shortfall metric and event), and only that one.
 */
import Anthropic from '@anthropic-ai/sdk';
import { CtxflowClient, type ProviderFormat, type StepUsage } from '@ctxflow/client';
import { runLoop } from '@ctxflow/client/loop';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { ATTR_PROVIDER_FORMAT, ATTR_TENANT, METRIC_PROVIDER_CACHE_SHORTFALLS } from '@ctxflow/telemetry';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ProviderStandIn, startProviderStandIn } from '../../../test/support/provider-stand-in.ts';
import { createTestTelemetry } from '../../../test/support/telemetry.ts';

const t = createTestTelemetry();
let embedded: EmbeddedApp;
let client: CtxflowClient;
let standIn: ProviderStandIn;
let openai: OpenAI;
let anthropic: Anthropic;
beforeAll(async () => {
  embedded = await buildEmbeddedApp({
    config: { apiKeys: new Map([['loop-usage-key', 'loop-usage-tenant']]), secrets: {} },
    telemetry: t.contextTelemetry,
  });
  const baseURL = await embedded.app.listen({ port: 0, host: '127.0.0.1' });
  client = new CtxflowClient({ baseURL, apiKey: 'loop-usage-key' });
  standIn = await startProviderStandIn();
  openai = new OpenAI({ apiKey: 'test', baseURL: `${standIn.origin}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'test', baseURL: standIn.origin, maxRetries: 0 });
});
afterAll(async () => {
  await embedded.close();
  await standIn.close();
  await t.shutdown();
});

const FORMATS: ProviderFormat[] = ['openai-chat', 'openai-responses', 'anthropic'];
const LOOKUP = { type: 'object', properties: { id: { type: 'string' } } };

/** A session whose prefix is past the providers' 1,024-token minimum, and four scripted turns. */
async function session(): Promise<string> {
  const { agentId } = await client.agents.create({
    context: `You are a support agent. ${'Answer from the order system only. '.repeat(60)}`,
    model: 'model-test',
    tools: [
      { name: 'lookup_order', description: 'Find an order.', parameters: LOOKUP },
      { name: 'track_parcel', description: 'Track a parcel.', parameters: LOOKUP },
    ],
  });
  const { sessionId } = await client.sessions.create({ agentId });
  standIn.script(
    { toolCalls: [{ name: 'lookup_order', arguments: { id: '7' } }] },
    { toolCalls: [{ name: 'track_parcel', arguments: { id: 'P-7' } }] },
    { toolCalls: [{ name: 'lookup_order', arguments: { id: '8' } }] },
    { toolCalls: [{ name: '__finish__', arguments: { result: 'Shipped Monday.' } }] },
  );
  return sessionId;
}

type Send = (request: any) => Promise<any>;
/** Each format's SDK call; `reorder` makes the runtime send the tools reversed from that model call on. */
function sdkCall(format: ProviderFormat, reorder?: number): Send {
  let calls = 0;
  const tools = (request: { tools?: unknown[] }) => {
    calls += 1;
    return reorder !== undefined && calls >= reorder && request.tools ? [...request.tools].reverse() : request.tools;
  };
  if (format === 'openai-chat') {
    return (request) => openai.chat.completions.create({ model: 'model-test', ...request, tools: tools(request) });
  }
  if (format === 'openai-responses') {
    return (request) => openai.responses.create({ model: 'model-test', ...request, tools: tools(request) });
  }
  return (request) =>
    anthropic.messages.create({ model: 'model-test', max_tokens: 256, ...request, tools: tools(request) });
}

async function loop(format: ProviderFormat, reorder?: number) {
  const sessionId = await session();
  const from = standIn.requests.length;
  const result = await runLoop({
    client,
    sessionId,
    format,
    userMessage: 'Where is order 7?',
    tools: { lookup_order: () => 'order: shipped Monday', track_parcel: () => 'parcel: at the depot' },
    callModel: sdkCall(format, reorder) as never,
  });
  expect(result).toMatchObject({ steps: 4, finished: true, result: 'Shipped Monday.' });
  const served = standIn.requests.slice(from);
  expect(served.map((r) => r.status)).toEqual([200, 200, 200, 200]);
  const inspection = (await client.sessions.inspect(sessionId)) as { usage: StepUsage[] };
  return { sessionId, result, served, usage: inspection.usage };
}

describe('runLoop reports the provider usage of every step', () => {
  for (const format of FORMATS) {
    it(`${format}: the session's hit ratio is the provider's, step by step, nothing flagged`, async () => {
      const { sessionId, result, served, usage } = await loop(format);
      // Each step's report is what the provider answered for that step's request.
      expect(usage.map((u) => [u.stepId, u.inputTokens, u.cachedTokens])).toEqual(
        served.map((r, i) => [result.stepIds[i], r.tokens!.input, r.tokens!.cached]),
      );
      // The provider read from its cache from the second request on (the prefix stayed whole) ...
      expect(usage.map((u) => u.cachedTokens > 0)).toEqual([false, true, true, true]);
      // ... exactly what each unchanged prefix predicted.
      expect(usage.map((u) => u.shortfall)).toEqual([false, false, false, false]);
      expect(usage.slice(1).map((u) => u.predictedTokens)).toEqual(usage.slice(1).map((u) => u.cachedTokens));
      const input = served.reduce((n, r) => n + r.tokens!.input, 0);
      const cached = served.reduce((n, r) => n + r.tokens!.cached, 0);
      const snapshot = await client.sessions.get(sessionId);
      expect(snapshot.providerCache).toEqual({
        reportedSteps: 4,
        inputTokens: input,
        cachedTokens: cached,
        hitRatio: cached / input,
        shortfalls: 0,
      });
    });
  }

  for (const format of FORMATS) {
    it(`${format}: a runtime that reorders the tools from the third call on is flagged at the third step`, async () => {
      const shortfallsBefore = await t.metric(METRIC_PROVIDER_CACHE_SHORTFALLS, {
        [ATTR_TENANT]: 'loop-usage-tenant',
        [ATTR_PROVIDER_FORMAT]: format,
      });
      const { sessionId, result, usage } = await loop(format, 3);
      expect(usage.map((u) => u.shortfall)).toEqual([false, false, true, false]);
      // What the provider held after the second request: OpenAI from 1,024 tokens in steps of 128,
      // Anthropic what it read and wrote up to the last breakpoint.
      const before = usage[1]!;
      const held =
        format === 'anthropic'
          ? before.cachedTokens + before.cacheWriteTokens
          : 1024 + Math.floor((before.inputTokens - 1024) / 128) * 128;
      expect(usage[2]).toMatchObject({ cachedTokens: 0, predictedTokens: held });
      expect((await client.sessions.get(sessionId)).providerCache.shortfalls).toBe(1);
      expect(
        await t.metric(METRIC_PROVIDER_CACHE_SHORTFALLS, {
          [ATTR_TENANT]: 'loop-usage-tenant',
          [ATTR_PROVIDER_FORMAT]: format,
        }),
      ).toBe(shortfallsBefore + 1);
      const events = (await t.logRecords()).filter(
        (r) => r.eventName === 'core.provider_cache.shortfall' && r.attributes['ctxflow.session_id'] === sessionId,
      );
      expect(events.map((e) => e.attributes['ctxflow.step_id'])).toEqual([result.stepIds[2]]);
    });
  }
});
