/**
 * S5 prompt-prefix stability: a scripted 200-step session driven through the
 * engine (createEngine, in-memory adapters) with feed notices from a scripted
 * stepContext hook, app items (the `POST /context` use case), tool switches by
 * the app and by a tool, memory, user turns (new runs), an agent-context edit,
 * a thread-context edit with forceRefresh, an idle gap past the cache TTL,
 * 2 rewinds and a branch.
 *
 * For every step, the request's bytes are `JSON.stringify(request.messages)`;
 * the previous request of its branch, without its closing `]`, must be a
 * byte-identical prefix of it: share = shared prefix bytes / those bytes,
 * exactly 1.0 except at steps the answer marks `cache.rebuilt`. After a rewind
 * the previous request is the rewind point's; a branch's first step follows
 * the step it branched at.
 *
 * Cost (Anthropic's published multipliers, tokens taken as proportional to
 * bytes): a warm step reads the previous request's bytes at 0.1x and writes
 * the rest at 1.25x; a rebuilt step, or one whose prefix changed, writes all
 * at 1.25x. Compared with rebuilding (writing) every request in full at 1.25x,
 * and with sending every request uncached at 1x.
 */
import type { Cursor } from '@ctxflow/contracts';
import {
  type Clock,
  createEngine,
  type NeutralStepResult,
  type StepContextSource,
  type StepResult,
} from '@ctxflow/session-runner';
import { cpuMs, perThousand } from './lib/cpu.ts';
import { progress } from './lib/progress.ts';
import type { ScenarioResult } from './lib/report.ts';
import { round } from './lib/stats.ts';

export const CACHE_READ = 0.1;
export const CACHE_WRITE = 1.25;
const STEPS = 200;
const STEP_GAP_MS = 20_000;
const TENANT = 'bench';

/** A ticket feed as a stepContext hook: notices published so far, the cursor is the last id delivered. */
class ScriptedFeed implements StepContextSource {
  readonly notices: { id: number; content: string }[] = [];

  publish(content: string): void {
    this.notices.push({ id: this.notices.length + 1, content });
  }

  async fetch(request: { cursor: Cursor | undefined }): Promise<unknown> {
    const after = typeof request.cursor === 'number' ? request.cursor : 0;
    const fresh = this.notices.filter((n) => n.id > after);
    if (fresh.length === 0) return undefined;
    return { items: fresh.map((n) => ({ kind: 'notice', content: n.content })), cursor: fresh.at(-1)!.id };
  }
}

interface StepRecordLine {
  step: number;
  sessionId: string;
  stepId: string;
  bytes: number;
  /** Bytes of the previous request of the branch, without its closing `]` (0 for the first step). */
  previousBytes: number;
  share: number;
  rebuilt: boolean;
  reason?: string;
  rows: number;
}

function sharedPrefix(a: Buffer, b: Buffer): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** A step of the session in Contract v2's neutral answer, with the step whose request precedes it on its branch. */
export type PrefixStep = (step: {
  step: number;
  answer: NeutralStepResult;
  previousStepId: string | undefined;
}) => void;

/**
 * `onStep`: called after each step with the same step's neutral answer (a replay of its
 * requestId, which commits nothing), for measures over the same session in other formats.
 */
export async function runPrefixStability(
  options: { onStep?: PrefixStep } = {},
): Promise<{ results: ScenarioResult[]; steps: StepRecordLine[] }> {
  let now = Date.parse('2026-01-05T09:00:00Z');
  const clock: Clock = { now: () => now };
  const feed = new ScriptedFeed();
  const engine = createEngine({ clock, feed });
  const agent = await engine.createAgent(TENANT, {
    context: [
      { id: 'role', content: 'You are the support desk agent of Example Corp. Answer tickets precisely.' },
      { id: 'policy', content: 'Never promise refunds over 100 EUR without an approval.' },
    ],
    model: 'claude-sonnet',
    tools: [
      { name: 'search', description: 'Search the knowledge base.' },
      { name: 'edit', description: 'Edit a ticket.' },
      { name: 'deploy', description: 'Deploy a fix.' },
    ],
    memory: { autoInject: true },
  });
  await engine.remember(TENANT, agent.agentId, 'The customer prefers answers in English.');
  const main = (await engine.createSession(TENANT, { agentId: agent.agentId, context: 'Thread: ticket PROJ-4312.' }))
    .sessionId;

  const lastRequest = new Map<string, Buffer>();
  /** The step whose request a session's next request follows (its branch's previous, or the rewind point's). */
  const lastStep = new Map<string, string>();
  const requestOf = new Map<string, Buffer>();
  const stepsOf = new Map<string, string[]>([[main, []]]);
  const lines: StepRecordLine[] = [];
  let branch: string | undefined;
  let callNo = 0;

  const cpuBefore = process.cpuUsage();
  for (let step = 1; step <= STEPS; step++) {
    // Steps 121-150 run on the branch; the rest on the main session.
    const session = step > 120 && step <= 150 ? branch! : main;
    now += STEP_GAP_MS;

    // ---- what happens before this model call
    if (step % 4 === 0)
      feed.publish(`PROJ-4312 update ${step}: customer replied, status ${step % 8 === 0 ? 'open' : 'pending'}.`);
    if (step % 25 === 0)
      for (let k = 0; k < 3; k++) feed.publish(`PROJ-${5000 + step + k}: linked ticket changed (${k}).`);
    if (step % 9 === 0 || step === 1) {
      await engine.appendMessage(TENANT, session, {
        role: 'user',
        content: `User turn before step ${step}: any news?`,
      });
    }
    if (step % 7 === 0) {
      await engine.addContext(TENANT, {
        sessionId: session,
        items: [{ kind: 'instruction', content: `Step ${step}: keep answers under 200 words.` }],
        key: `app-${session}-${step}`,
      });
    }
    if (step === 20)
      await engine.addContext(TENANT, { sessionId: session, items: [{ kind: 'tools', disable: ['deploy'] }] });
    if (step === 50)
      await engine.addContext(TENANT, { sessionId: session, items: [{ kind: 'tools', enable: ['deploy'] }] });
    if (step === 30) await engine.updateSession(TENANT, session, { context: 'Thread: ticket PROJ-4312 (escalated).' });
    if (step === 45)
      await engine.updateAgent(TENANT, agent.agentId, {
        context: [{ id: 'policy', content: 'Refunds over 100 EUR need an approval.' }],
      });
    if (step === 60) now += 6 * 60_000; // idle past the 5-minute cache TTL
    if (step === 100) await engine.updateSession(TENANT, session, { forceRefresh: true });
    if (step === 70 || step === 140) {
      // Rewind: to after step 64 (toStepId), or to before the branch's 4th-last step (beforeStepId).
      const ids = stepsOf.get(session)!;
      const back = step === 70 ? ids.length - 6 : ids.length - 4;
      const target = ids[back - 1]!;
      const ref = step === 70 ? { toStepId: target } : { beforeStepId: target };
      await engine.rewind(TENANT, session, ref);
      const keep = step === 70 ? back : back - 1;
      stepsOf.set(session, ids.slice(0, keep));
      lastRequest.set(session, requestOf.get(ids[keep - 1]!)!);
      lastStep.set(session, ids[keep - 1]!);
    }
    if (step === 121) {
      const ids = stepsOf.get(main)!;
      const at = ids[ids.length - 10]!;
      branch = (await engine.branch(TENANT, main, { atStepId: at })).sessionId;
      stepsOf.set(branch, ids.slice(0, ids.length - 9));
      lastRequest.set(branch, requestOf.get(at)!);
      lastStep.set(branch, at);
      // The branch's first step belongs to it, not to main.
      await engine.appendMessage(TENANT, branch, { role: 'user', content: 'On this branch: try the other fix.' });
    }
    const target = step > 120 && step <= 150 ? branch! : main;

    // ---- the model call's context pass
    const requestId = `s5-${step}`;
    const result: StepResult = await engine.step(TENANT, target, { requestId });
    if (options.onStep) {
      const answer = await engine.step(TENANT, target, { requestId, format: 'neutral' });
      options.onStep({ step, answer, previousStepId: lastStep.get(target) });
    }
    const bytes = Buffer.from(JSON.stringify(result.request.messages));
    const previous = lastRequest.get(target);
    let share = 1;
    let previousBytes = 0;
    if (previous !== undefined) {
      const body = previous.subarray(0, previous.length - 1);
      previousBytes = body.length;
      share = sharedPrefix(body, bytes) / body.length;
    }
    lines.push({
      step,
      sessionId: target,
      stepId: result.stepId,
      bytes: bytes.length,
      previousBytes,
      share,
      rebuilt: result.cache.rebuilt,
      ...(result.cache.reason ? { reason: result.cache.reason } : {}),
      rows: result.rows.length,
    });
    lastRequest.set(target, bytes);
    lastStep.set(target, result.stepId);
    requestOf.set(result.stepId, bytes);
    stepsOf.get(target)!.push(result.stepId);

    // ---- the model answers with a tool call; the tool runs and answers
    const tool = result.request.activeTools.find((t) => t !== '__finish__' && (step % 2 === 0 ? t === 'edit' : true));
    if (tool) {
      const callId = `call_${++callNo}`;
      await engine.appendMessage(TENANT, target, {
        role: 'assistant',
        content: `Step ${step}: calling ${tool}.`,
        toolCalls: [{ callId, name: tool }],
      });
      const decision = await engine.gateToolCall(TENANT, target, { callId, name: tool });
      if (decision.execute) {
        await engine.appendMessage(TENANT, target, { role: 'tool', content: `${tool} result ${step}`, callId });
        if (step === 90) {
          // A tool switches a tool off for the next calls (R19: off only).
          await engine.addCallContext(TENANT, target, {
            callId,
            origin: 'tool',
            items: [{ kind: 'tools', disable: ['search'] }],
          });
        }
      }
    }
    if (step === 95)
      await engine.addContext(TENANT, { sessionId: target, items: [{ kind: 'tools', enable: ['search'] }] });
  }
  const cpu = cpuMs(cpuBefore);

  // ---- prefix shares and cache cost
  const warm = lines.filter((l) => !l.rebuilt);
  const rebuilt = lines.filter((l) => l.rebuilt);
  const broken = warm.filter((l) => l.share !== 1);
  let cached = 0;
  let rebuildAll = 0;
  let uncached = 0;
  let read = 0;
  for (const line of lines) {
    // A warm step reads the previous request (minus its `]`) from the cache and writes the rest.
    const prefix = line.rebuilt || line.share !== 1 ? 0 : line.previousBytes;
    read += prefix;
    cached += CACHE_READ * prefix + CACHE_WRITE * (line.bytes - prefix);
    rebuildAll += CACHE_WRITE * line.bytes;
    uncached += line.bytes;
  }
  progress(`S5: ${lines.length} steps, ${rebuilt.length} rebuilt, ${broken.length} warm steps with a changed prefix`);

  const minWarm = Math.min(...warm.map((l) => l.share));
  const cpuPer1k = round(perThousand(cpu, lines.length), 1);
  return {
    steps: lines,
    results: [
      {
        id: 'S5',
        title: 'Prompt-prefix stability, 200-step session',
        ratioOf: 'share of the previous request byte-identical in the next (warm steps: min-max)',
        goal: { op: '==', value: 1 },
        ratio: { median: minWarm, min: minWarm, max: Math.max(...warm.map((l) => l.share)), trials: [minWarm] },
        met: broken.length === 0,
        cpuMsPer1k: { 'engine (per 1k steps)': cpuPer1k },
        figures: {
          steps: lines.length,
          'warm steps': warm.length,
          'rebuilt steps': rebuilt.map((l) => `${l.step}:${l.reason}`).join(' '),
          'last request bytes': lines.at(-1)!.bytes,
        },
        notes: [
          'scripted feed notices, app items, tool switches (app and tool), memory, user turns, 2 rewinds, a branch',
          broken.length === 0
            ? 'every warm step starts with the previous request of its branch'
            : `warm steps with a changed prefix: ${broken.map((l) => `${l.step} (${round(l.share, 4)})`).join(', ')}`,
        ],
      },
      {
        id: 'S5-cost',
        title: 'Prompt cache cost of the 200 steps',
        ratioOf: 'cost with the cache over rebuilding every step (reads 0.1x, writes 1.25x)',
        goal: { op: '<=', value: 1 },
        ratio: {
          median: cached / rebuildAll,
          min: cached / rebuildAll,
          max: cached / rebuildAll,
          trials: [cached / rebuildAll],
        },
        met: cached / rebuildAll <= 1,
        cpuMsPer1k: {},
        figures: {
          'cost over uncached (1x every request)': round(cached / uncached),
          'input bytes sent': uncached,
          'bytes read from the cache': read,
        },
      },
    ],
  };
}
