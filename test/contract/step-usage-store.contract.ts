/**
 * The step usage store contract: every adapter of the port in
 * services/session-runner/src/ports/step-usage-store.ts passes these tests (the in-memory
 * store, the Redis store on a real Redis and a Redis Cluster).
 */
import { randomUUID } from 'node:crypto';
import type { Clock, StepUsage, StepUsageStore } from '@ctxflow/session-runner';
import { afterEach, describe, expect, it } from 'vitest';

/** A store's retention and clock (the memory store's; Redis keeps time itself). */
export interface StepUsageStoreOptions {
  ttlMs?: number;
  clock?: Clock;
}

export type StepUsageStoreFactory = (options?: StepUsageStoreOptions) => Promise<{
  store: StepUsageStore;
  cleanup(): Promise<void>;
  /** Waits `ms` of the store's time (the memory store's clock moves; Redis waits). */
  pass?(ms: number): Promise<void>;
}>;

function usage(ordinal: number, overrides: Partial<StepUsage> = {}): StepUsage {
  return {
    stepId: `stp_${randomUUID()}`,
    ordinal,
    format: 'openai-chat',
    inputTokens: 2048 + ordinal,
    cachedTokens: 1024,
    cacheWriteTokens: 0,
    predictedTokens: 1024,
    shortfall: false,
    at: '2026-01-01T00:00:00.000Z',
    ...overrides,
  };
}

export function stepUsageStoreContract(name: string, make: StepUsageStoreFactory): void {
  describe(`step usage store contract: ${name}`, () => {
    const cleanups: (() => Promise<void>)[] = [];
    afterEach(async () => {
      for (const cleanup of cleanups.splice(0)) await cleanup();
    });
    async function open(options?: StepUsageStoreOptions) {
      const made = await make(options);
      cleanups.push(made.cleanup);
      return made;
    }

    it('records a report and lists the session reports by ordinal, values as recorded', async () => {
      const { store } = await open();
      const sessionId = `ses_${randomUUID()}`;
      const third = usage(3, { format: 'anthropic', cacheWriteTokens: 7, predictedTokens: null });
      const first = usage(1, { predictedTokens: 0, cachedTokens: 0 });
      const second = usage(2, { shortfall: true, cachedTokens: 0 });
      for (const u of [third, first, second]) {
        expect(await store.record(sessionId, u)).toEqual({ recorded: true, usage: u });
      }
      expect(await store.list(sessionId)).toEqual([first, second, third]);
      expect(await store.list(`ses_${randomUUID()}`)).toEqual([]);
    });

    it("get reads one step's report as recorded; undefined for a step or session without one", async () => {
      const { store } = await open();
      const sessionId = `ses_${randomUUID()}`;
      const first = usage(1, { format: 'anthropic', cacheWriteTokens: 9, predictedTokens: null });
      const second = usage(2, { shortfall: true });
      await store.record(sessionId, first);
      await store.record(sessionId, second);
      expect(await store.get(sessionId, first.stepId)).toEqual(first);
      expect(await store.get(sessionId, second.stepId)).toEqual(second);
      expect(await store.get(sessionId, `stp_${randomUUID()}`)).toBeUndefined();
      expect(await store.get(`ses_${randomUUID()}`, first.stepId)).toBeUndefined();
      // A repeat does not change what get reads.
      await store.record(sessionId, { ...first, cachedTokens: 0 });
      expect(await store.get(sessionId, first.stepId)).toEqual(first);
      await store.deleteSession(sessionId);
      expect(await store.get(sessionId, first.stepId)).toBeUndefined();
    });

    it('first report wins: a second report of the step records nothing and answers the first', async () => {
      const { store } = await open();
      const sessionId = `ses_${randomUUID()}`;
      const first = usage(1);
      await store.record(sessionId, first);
      const again = { ...first, cachedTokens: 0, shortfall: true };
      expect(await store.record(sessionId, again)).toEqual({ recorded: false, usage: first });
      expect(await store.list(sessionId)).toEqual([first]);
    });

    it('racing reports of one step: exactly one is recorded, every answer names it', async () => {
      const { store } = await open();
      const sessionId = `ses_${randomUUID()}`;
      const stepId = `stp_${randomUUID()}`;
      const reports = Array.from({ length: 8 }, (_, i) => usage(1, { stepId, cachedTokens: i }));
      const answers = await Promise.all(reports.map((r) => store.record(sessionId, r)));
      expect(answers.filter((a) => a.recorded)).toHaveLength(1);
      const winner = answers.find((a) => a.recorded)!.usage;
      for (const a of answers) expect(a.usage).toEqual(winner);
      expect(await store.list(sessionId)).toEqual([winner]);
    });

    it("deleteSession erases the session's reports, not another's; again is a no-op", async () => {
      const { store } = await open();
      const a = `ses_${randomUUID()}`;
      const b = `ses_${randomUUID()}`;
      await store.record(a, usage(1));
      const kept = usage(1);
      await store.record(b, kept);
      await store.deleteSession(a);
      await store.deleteSession(a);
      expect(await store.list(a)).toEqual([]);
      expect(await store.list(b)).toEqual([kept]);
      const fresh = usage(1);
      expect(await store.record(a, fresh)).toEqual({ recorded: true, usage: fresh });
    });

    it('retention: the reports are kept ttlMs after the last report, then gone all at once', async () => {
      const made = await open({ ttlMs: 600 });
      if (!made.pass) throw new Error('a retention test needs the factory to pass time');
      const { store } = made;
      const sessionId = `ses_${randomUUID()}`;
      const first = usage(1);
      await store.record(sessionId, first);
      await made.pass(350);
      const second = usage(2);
      await store.record(sessionId, second);
      await made.pass(350);
      // 700 ms after the first report, 350 after the last: both kept.
      expect(await store.list(sessionId)).toEqual([first, second]);
      expect(await store.get(sessionId, first.stepId)).toEqual(first);
      await made.pass(400);
      expect(await store.list(sessionId)).toEqual([]);
      expect(await store.get(sessionId, first.stepId)).toBeUndefined();
    });
  });
}
