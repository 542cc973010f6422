/**
 * S5 per format, as a test: the scripted 200-step session of the S5 benchmark
 * (bench/prefix-stability.ts: feed notices, app items, tool switches by the app and by a tool,
 * memory, user turns, an agent-context edit, forceRefresh, an idle gap, 2 rewinds and a branch),
 * each step's neutral answer converted to each provider format and sent with the official SDK
 * to the provider stand-in, which accepts every one of the 600 bodies; and in what each provider
 * caches, every warm step's body starts with the previous body of its branch.
 */
import Anthropic from '@anthropic-ai/sdk';
import type { NeutralStepResult } from '@ctxflow/session-runner';
import { cachedPrefix, type ProviderFormat, prefixShare, toProviderRequest } from '@ctxflow/session-runner';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runPrefixStability } from '../../bench/prefix-stability.ts';
import { type ProviderStandIn, startProviderStandIn } from '../support/provider-stand-in.ts';

let standIn: ProviderStandIn;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  standIn = await startProviderStandIn();
  openai = new OpenAI({ apiKey: 'test', baseURL: `${standIn.origin}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: 'test', baseURL: standIn.origin, maxRetries: 0 });
});
afterAll(() => standIn.close());

const send: { [F in ProviderFormat]: (answer: NeutralStepResult) => Promise<unknown> } = {
  'openai-chat': (a) =>
    openai.chat.completions.create({ model: 'm', ...toProviderRequest('openai-chat', a.request, a.cache) }),
  'openai-responses': (a) =>
    openai.responses.create({ model: 'm', ...toProviderRequest('openai-responses', a.request, a.cache) }),
  anthropic: (a) =>
    anthropic.messages.create({ model: 'm', max_tokens: 64, ...toProviderRequest('anthropic', a.request, a.cache) }),
};

function share<F extends ProviderFormat>(format: F, previous: NeutralStepResult, next: NeutralStepResult): number {
  const prefix = cachedPrefix[format];
  return prefixShare(
    prefix(toProviderRequest(format, previous.request, previous.cache)),
    prefix(toProviderRequest(format, next.request, next.cache)),
  );
}

describe('S5 per provider format over the scripted 200-step session', () => {
  it('R3: every body is accepted by the API rules and every warm step keeps the previous body of its branch as its prefix', async () => {
    const answers = new Map<string, NeutralStepResult>();
    const steps: { step: number; answer: NeutralStepResult; previous: NeutralStepResult | undefined }[] = [];
    await runPrefixStability({
      onStep: ({ step, answer, previousStepId }) => {
        answers.set(answer.stepId, answer);
        steps.push({ step, answer, previous: previousStepId === undefined ? undefined : answers.get(previousStepId) });
      },
    });
    expect(steps).toHaveLength(200);
    const from = standIn.requests.length;
    for (const { answer } of steps) {
      await send['openai-chat'](answer);
      await send['openai-responses'](answer);
      await send.anthropic(answer);
    }
    const refused = standIn.requests.slice(from).filter((r) => r.status !== 200);
    expect(refused.map((r) => `${r.api}: ${r.error}`)).toEqual([]);
    expect(standIn.requests.length - from).toBe(600);

    const broken: string[] = [];
    for (const { step, answer, previous } of steps) {
      if (answer.cache.rebuilt || previous === undefined) continue;
      for (const format of ['openai-chat', 'openai-responses', 'anthropic'] as const) {
        const s = share(format, previous, answer);
        if (s !== 1) broken.push(`${format} step ${step}: ${s}`);
      }
    }
    expect(broken).toEqual([]);
    expect(steps.filter((s) => !s.answer.cache.rebuilt && s.previous !== undefined).length).toBeGreaterThan(180);
  }, 120_000);
});
