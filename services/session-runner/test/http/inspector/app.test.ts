import type { RunnerTelemetry } from '@ctxflow/session-runner';
import { createEngine } from '@ctxflow/session-runner';
import { describe, expect, it } from 'vitest';
import {
  type InspectedEntry,
  type InspectedStep,
  type InspectedUsage,
  prefixReuse,
  providerCacheRows,
} from '../../../src/http/inspector/app.js';

type Committed = Parameters<RunnerTelemetry['stepCommitted']>[0];

describe('inspector: prompt-prefix reuse computed in the page', () => {
  it('equals what the runner reported for every step (warm steps, rows, tool switches, a forced rebuild)', async () => {
    const committed: Committed[] = [];
    const engine = createEngine({
      telemetry: { contextSkipped() {}, stepCommitted: (e) => committed.push(e) },
    });
    const tenant = 'inspector-reuse';
    const agent = await engine.createAgent(tenant, {
      context: 'You answer support tickets.',
      tools: [{ name: 'lookup', description: 'look a ticket up' }],
    });
    const { sessionId } = await engine.createSession(tenant, { agentId: agent.agentId, context: 'Thread: café ✓' });

    await engine.appendMessage(tenant, sessionId, { role: 'user', content: 'Hello, is T-1 fixed?' });
    await engine.step(tenant, sessionId);
    await engine.addContext(tenant, {
      sessionId,
      items: [{ kind: 'notice', content: 'T-1 "closed" by Zoë </context> <b>done</b> 🚀' }],
    });
    await engine.appendMessage(tenant, sessionId, { role: 'assistant', content: 'Let me check.' });
    await engine.step(tenant, sessionId);
    await engine.addContext(tenant, { sessionId, items: [{ kind: 'tools', disable: ['lookup'] }] });
    await engine.step(tenant, sessionId);
    await engine.updateSession(tenant, sessionId, { context: 'Thread: renamed', forceRefresh: true });
    await engine.appendMessage(tenant, sessionId, { role: 'user', content: 'And now?' });
    await engine.step(tenant, sessionId);

    const inspected = await engine.inspect(tenant, sessionId);
    const points = prefixReuse(
      inspected.steps as unknown as InspectedStep[],
      inspected.log as unknown as InspectedEntry[],
    );

    expect(points.map((p) => [p.stepId, p.requestBytes, p.prefixReusedBytes])).toEqual(
      committed.map((c) => [c.stepId, c.requestBytes, c.prefixReusedBytes]),
    );
    expect(points.map((p) => p.ordinal)).toEqual([1, 2, 3, 4]);
    // Not vacuous: a first step reuses nothing, warm steps reuse the whole previous request
    // but its closing bracket, and the rebuild (new system prefix) reuses only the bytes
    // before the changed thread context.
    expect(points[0]!.prefixReusedBytes).toBe(0);
    expect(points[1]!.prefixReusedBytes).toBe(points[0]!.requestBytes - 1);
    expect(points[2]!.prefixReusedBytes).toBe(points[1]!.requestBytes - 1);
    expect(points[3]!.rebuilt).toBe(true);
    expect(points[3]!.prefixReusedBytes).toBeGreaterThan(0);
    expect(points[3]!.prefixReusedBytes).toBeLessThan(points[2]!.requestBytes - 1);
  });
});

describe("inspector: the provider's prompt cache per step", () => {
  it('shows each reported step in step order with its hit share and its shortfall mark', async () => {
    const engine = createEngine();
    const tenant = 'inspector-cache';
    const { sessionId } = await engine.createSession(tenant, {});
    await engine.appendMessage(tenant, sessionId, { role: 'user', content: 'Hello' });
    const first = await engine.step(tenant, sessionId);
    const second = await engine.step(tenant, sessionId);
    // Reported out of order: the page still lists them by step.
    await engine.reportUsage(tenant, sessionId, second.stepId, {
      format: 'anthropic',
      usage: { input_tokens: 10, cache_read_input_tokens: 0, cache_creation_input_tokens: 2000 },
    });
    await engine.reportUsage(tenant, sessionId, first.stepId, {
      format: 'anthropic',
      usage: { input_tokens: 4, cache_read_input_tokens: 0, cache_creation_input_tokens: 1996 },
    });
    const inspected = await engine.inspect(tenant, sessionId);
    expect(providerCacheRows(inspected.usage as InspectedUsage[])).toEqual([
      {
        stepId: first.stepId,
        ordinal: 1,
        format: 'anthropic',
        inputTokens: 2000,
        cachedTokens: 0,
        predictedTokens: 0,
        hit: '0%',
        shortfall: false,
      },
      // Reported before the first step's report: nothing to predict from.
      {
        stepId: second.stepId,
        ordinal: 2,
        format: 'anthropic',
        inputTokens: 2010,
        cachedTokens: 0,
        predictedTokens: null,
        hit: '0%',
        shortfall: false,
      },
    ]);
  });
});
