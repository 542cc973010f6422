/**
 * POST /sessions/:sessionId/steps/:stepId/usage on the runner's app: each SDK's usage object as it
 * is, what the step's unchanged prefix predicted, the shortfall flag with its metric and event, the
 * snapshot's and inspection's figures, first report wins, and refusals that record nothing.
 */
import { createAuthenticator } from '@ctxflow/service-kit';
import { buildRunnerApp, createEngine, MemoryStepUsageStore } from '@ctxflow/session-runner';
import {
  ATTR_PROVIDER_FORMAT,
  ATTR_TENANT,
  METRIC_PROVIDER_CACHE_SHORTFALLS,
  METRIC_PROVIDER_CACHED_TOKENS,
  METRIC_PROVIDER_INPUT_TOKENS,
  METRIC_PROVIDER_PREDICTED_TOKENS,
} from '@ctxflow/telemetry';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestTelemetry } from '../../../../test/support/telemetry.ts';

const t = createTestTelemetry();
const usageStore = new MemoryStepUsageStore();
const app = buildRunnerApp({
  engine: createEngine({ telemetry: t.contextTelemetry, usage: usageStore }),
  authenticate: createAuthenticator(
    new Map([
      ['usage-key-a', 'usage-tenant-a'],
      ['usage-key-b', 'usage-tenant-b'],
    ]),
  ),
});
afterAll(async () => {
  await app.close();
  await t.shutdown();
});

const A = { authorization: 'Bearer usage-key-a' };
const B = { authorization: 'Bearer usage-key-b' };

async function call(method: 'GET' | 'POST', url: string, body?: unknown, headers = A) {
  const response = await app.inject({
    method,
    url,
    headers,
    ...(body === undefined ? {} : { payload: body as object }),
  });
  return { status: response.statusCode, body: response.json() as Record<string, unknown> };
}

async function session(): Promise<string> {
  const agent = await call('POST', '/agents', { context: 'You answer tickets.', tools: [{ name: 'lookup' }] });
  const created = await call('POST', '/sessions', { agentId: agent.body.agentId });
  await call('POST', `/sessions/${created.body.sessionId}/messages`, { role: 'user', content: 'Hello' });
  return created.body.sessionId as string;
}

async function step(sessionId: string): Promise<{ stepId: string; rebuilt: boolean }> {
  const answer = await call('POST', `/sessions/${sessionId}/steps`, {});
  expect(answer.status).toBe(200);
  const cache = answer.body.cache as { rebuilt: boolean };
  return { stepId: answer.body.stepId as string, rebuilt: cache.rebuilt };
}

/** A chat completion's usage as the openai SDK returns it (fields beside the read ones too). */
const chatUsage = (prompt: number, cached: number) => ({
  prompt_tokens: prompt,
  completion_tokens: 9,
  total_tokens: prompt + 9,
  prompt_tokens_details: { cached_tokens: cached, audio_tokens: 0 },
  completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0 },
});

describe('POST /sessions/:sessionId/steps/:stepId/usage', () => {
  it('openai-chat: predicts from the step before, flags the step whose provider cached less', async () => {
    const sessionId = await session();
    const steps = [await step(sessionId), await step(sessionId), await step(sessionId)];
    expect(steps.map((s) => s.rebuilt)).toEqual([true, false, false]);
    const report = (i: number, prompt: number, cached: number) =>
      call('POST', `/sessions/${sessionId}/steps/${steps[i]!.stepId}/usage`, {
        format: 'openai-chat',
        usage: chatUsage(prompt, cached),
      });

    const first = await report(0, 3000, 0);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      recorded: true,
      usage: {
        stepId: steps[0]!.stepId,
        ordinal: 1,
        format: 'openai-chat',
        inputTokens: 3000,
        cachedTokens: 0,
        cacheWriteTokens: 0,
        // A rebuilt prefix predicts nothing cached.
        predictedTokens: 0,
        shortfall: false,
        at: expect.any(String),
      },
    });
    // 3,000 tokens before: OpenAI holds 1,024 + 15 * 128 = 2,944 of them.
    const second = await report(1, 4000, 2944);
    expect(second.body.usage).toMatchObject({
      ordinal: 2,
      predictedTokens: 2944,
      cachedTokens: 2944,
      shortfall: false,
    });
    // 4,000 before: 1,024 + 23 * 128 = 3,968 held, 0 read: the prefix broke on the way.
    const third = await report(2, 4100, 0);
    expect(third.body.usage).toMatchObject({ ordinal: 3, predictedTokens: 3968, cachedTokens: 0, shortfall: true });

    const snapshot = await call('GET', `/sessions/${sessionId}`);
    expect(snapshot.body.providerCache).toEqual({
      reportedSteps: 3,
      inputTokens: 11100,
      cachedTokens: 2944,
      hitRatio: 2944 / 11100,
      shortfalls: 1,
    });
    const inspection = await call('GET', `/sessions/${sessionId}/inspect`);
    expect((inspection.body.usage as { shortfall: boolean }[]).map((u) => u.shortfall)).toEqual([false, false, true]);
    expect(inspection.body.providerCache).toEqual(snapshot.body.providerCache);

    const by = { [ATTR_TENANT]: 'usage-tenant-a', [ATTR_PROVIDER_FORMAT]: 'openai-chat' };
    expect(await t.metric(METRIC_PROVIDER_INPUT_TOKENS, by)).toBe(11100);
    expect(await t.metric(METRIC_PROVIDER_CACHED_TOKENS, by)).toBe(2944);
    expect(await t.metric(METRIC_PROVIDER_PREDICTED_TOKENS, by)).toBe(2944 + 3968);
    expect(await t.metric(METRIC_PROVIDER_CACHE_SHORTFALLS, by)).toBe(1);
    const events = (await t.logRecords()).filter((r) => r.eventName === 'core.provider_cache.shortfall');
    expect(events).toEqual([
      {
        eventName: 'core.provider_cache.shortfall',
        severityNumber: 13,
        severityText: 'WARN',
        body: 'the provider cached 0 input tokens of the 3968 the unchanged prefix predicted',
        attributes: {
          'ctxflow.session_id': sessionId,
          'ctxflow.step_id': steps[2]!.stepId,
          'ctxflow.tenant': 'usage-tenant-a',
          'ctxflow.provider.format': 'openai-chat',
          'ctxflow.provider.cached_tokens': 0,
          'ctxflow.provider.predicted_tokens': 3968,
        },
        traceId: undefined,
        spanId: undefined,
      },
    ]);
  });

  it('anthropic and openai-responses: each SDK usage object read as its API counts it', async () => {
    const sessionId = await session();
    const [s1, s2, s3] = [await step(sessionId), await step(sessionId), await step(sessionId)];
    const anthropic = (stepId: string, input: number, read: number, written: number) =>
      call('POST', `/sessions/${sessionId}/steps/${stepId}/usage`, {
        format: 'anthropic',
        usage: {
          input_tokens: input,
          output_tokens: 12,
          cache_read_input_tokens: read,
          cache_creation_input_tokens: written,
          cache_creation: null,
          server_tool_use: null,
          service_tier: 'standard',
          inference_geo: null,
          output_tokens_details: null,
          speed: null,
        },
      });
    expect((await anthropic(s1!.stepId, 3, 0, 1500)).body.usage).toMatchObject({
      inputTokens: 1503,
      cachedTokens: 0,
      cacheWriteTokens: 1500,
      predictedTokens: 0,
      shortfall: false,
    });
    // Anthropic holds what the step before read and wrote up to its last breakpoint: 1,500.
    expect((await anthropic(s2!.stepId, 2, 1500, 400)).body.usage).toMatchObject({
      inputTokens: 1902,
      cachedTokens: 1500,
      predictedTokens: 1500,
      shortfall: false,
    });
    // A step in another format than the step before: nothing predicted, nothing flagged.
    const responses = await call('POST', `/sessions/${sessionId}/steps/${s3!.stepId}/usage`, {
      format: 'openai-responses',
      usage: {
        input_tokens: 2000,
        input_tokens_details: { cached_tokens: 1024, cache_write_tokens: 0 },
        output_tokens: 5,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 2005,
      },
    });
    expect(responses.body.usage).toMatchObject({
      format: 'openai-responses',
      inputTokens: 2000,
      cachedTokens: 1024,
      predictedTokens: null,
      shortfall: false,
    });
  });

  it('first report wins: a repeat records nothing and answers the first', async () => {
    const sessionId = await session();
    const { stepId } = await step(sessionId);
    const url = `/sessions/${sessionId}/steps/${stepId}/usage`;
    const first = await call('POST', url, { format: 'openai-chat', usage: chatUsage(1200, 0) });
    const again = await call('POST', url, { format: 'openai-chat', usage: chatUsage(9999, 1024) });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ recorded: false, usage: (first.body as { usage: unknown }).usage });
    expect((await call('GET', `/sessions/${sessionId}`)).body.providerCache).toMatchObject({
      reportedSteps: 1,
      inputTokens: 1200,
    });
  });

  it('refusals record nothing: unknown step, another tenant, contradicting counts, bad bodies', async () => {
    const sessionId = await session();
    const { stepId } = await step(sessionId);
    const url = `/sessions/${sessionId}/steps/${stepId}/usage`;
    const body = { format: 'openai-chat', usage: chatUsage(2000, 0) };
    const unknownStep = await call('POST', `/sessions/${sessionId}/steps/stp_unknown/usage`, body);
    expect(unknownStep).toMatchObject({ status: 404, body: { error: { code: 'state_step_not_found' } } });
    const otherTenant = await call('POST', url, body, B);
    expect(otherTenant).toMatchObject({ status: 404, body: { error: { code: 'state_session_not_found' } } });
    const contradicting = await call('POST', url, { format: 'openai-chat', usage: chatUsage(100, 200) });
    expect(contradicting).toMatchObject({
      status: 400,
      body: {
        error: {
          code: 'validation_error',
          message: 'usage: more cached or cache-written tokens than input tokens',
          retryable: false,
        },
      },
    });
    for (const bad of [
      { format: 'gemini', usage: chatUsage(1, 0) },
      { format: 'openai-chat' },
      { format: 'openai-chat', usage: { prompt_tokens: -1 } },
      { format: 'openai-chat', usage: { prompt_tokens: 1.5 } },
      { format: 'openai-responses', usage: { input_tokens: 5 } },
      { format: 'anthropic', usage: { cache_read_input_tokens: 5 } },
      { format: 'openai-chat', usage: chatUsage(1, 0), extra: true },
      null,
    ]) {
      const refused = await call('POST', url, bad);
      expect(refused.status, JSON.stringify(bad)).toBe(400);
      expect((refused.body.error as { code: string }).code).toBe('validation_error');
    }
    expect(await usageStore.list(sessionId)).toEqual([]);
  });

  it("erasing the session erases its steps' usage", async () => {
    const sessionId = await session();
    const { stepId } = await step(sessionId);
    await call('POST', `/sessions/${sessionId}/steps/${stepId}/usage`, {
      format: 'openai-chat',
      usage: chatUsage(2000, 0),
    });
    expect(await usageStore.list(sessionId)).toHaveLength(1);
    const erased = await app.inject({ method: 'DELETE', url: `/sessions/${sessionId}`, headers: A });
    expect(erased.statusCode).toBe(204);
    expect(await usageStore.list(sessionId)).toEqual([]);
  });
});
