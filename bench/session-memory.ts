/**
 * S8 session memory on Redis: the Redis `MEMORY USAGE` of every key of one session
 * (its hash tag `{<sessionId>}`) after 100 steps (`--s8-steps=N` for another length; the
 * figures then name each key's share, the step records' and the request-id records' among them), over the bytes of its rows and
 * messages (the JSON of its log entries as the store keeps them). Each step, as a runtime on a
 * runner that holds nothing: a user message, an app notice queued with an idempotency key, the
 * step asked as a delta (`since`: its rows and step record, with an agent's system prompt), an
 * assistant message with a tool call, the tool gate's decision on it, the tool's answer. Goal:
 * at most 2x. A long run prints the figures, its elapsed time and its rate at ten points.
 */
import { randomUUID } from 'node:crypto';
import { createEngine, RedisSessionStore } from '@ctxflow/session-runner';
import { Redis } from 'ioredis';
import { progress } from './lib/progress.ts';
import { meets, type ScenarioResult } from './lib/report.ts';
import { round, summarize } from './lib/stats.ts';

const TENANT = 'bench';
const DEFAULT_STEPS = 100;
const NOTICE =
  'Ticket PROJ-4312 moved to In Progress by alice@example.com: "Checkout fails for carts over 50 items" (priority P2).';

async function keysOf(redis: Redis, prefix: string, sessionId: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*{${sessionId}}*`, 'COUNT', 1000);
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found;
}

/** MEMORY USAGE of each key of the session (by its name after the hash tag), and the log's JSON bytes. */
async function measure(redis: Redis, prefix: string, sessionId: string) {
  const keys = await keysOf(redis, prefix, sessionId);
  let usage = 0;
  const perKey: Record<string, number> = {};
  for (const key of keys) {
    const bytes = Number((await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
    usage += bytes;
    perKey[`MEMORY USAGE bytes of ${key.slice(key.lastIndexOf('}') + 2) || 'meta'}`] = bytes;
  }
  const log = await redis.lrange(`${prefix}:{${sessionId}}:log`, 0, -1);
  const logBytes = log.reduce((sum, entry) => sum + Buffer.byteLength(entry, 'utf8'), 0);
  return { keys, usage, perKey, entries: log.length, logBytes };
}

async function deleteByPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

export async function runSessionMemory(options: {
  redisUrl: string;
  trials: number;
  steps?: number;
}): Promise<ScenarioResult[]> {
  const STEPS = options.steps ?? DEFAULT_STEPS;
  const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: 3 });
  const ratios: number[] = [];
  const figures: Record<string, number | string> = {};
  try {
    for (let trial = 0; trial < options.trials; trial++) {
      const prefix = `bench-s8-${randomUUID().slice(0, 8)}`;
      try {
        const store = new RedisSessionStore(redis, { prefix, ttlMs: 30 * 24 * 3_600_000 });
        // Nothing held: every operation reads the session from Redis (its log window).
        const engine = createEngine({ store, heldSessions: 0 });
        const agent = await engine.createAgent(TENANT, {
          context: [{ id: 'persona', content: 'You are a support engineer. Answer briefly and cite the ticket.' }],
          tools: [{ name: 'search', description: 'Searches the knowledge base.' }],
        });
        const { sessionId } = await engine.createSession(TENANT, { agentId: agent.agentId });
        // The messages the runtime holds of its last request: each step is asked as a delta from them.
        let held = 0;
        // Time spent in steps, and where the last point ended (measurements are not counted).
        let stepMs = 0;
        let lastPoint = { at: performance.now(), step: 0 };
        for (let step = 1; step <= STEPS; step++) {
          await engine.appendMessage(TENANT, sessionId, {
            role: 'user',
            content: `Question ${step}: is it fixed yet?`,
          });
          await engine.addContext(TENANT, {
            sessionId,
            key: `notice-${step}`,
            items: [{ kind: 'notice', content: `${NOTICE} (update ${step})` }],
          });
          const { request } = await engine.step(TENANT, sessionId, { requestId: `req-${step}`, since: held });
          held = (request.since ?? 0) + request.messages.length;
          const callId = `call_${step}`;
          await engine.appendMessage(TENANT, sessionId, {
            role: 'assistant',
            content: `Step ${step}: searching.`,
            toolCalls: [{ callId, name: 'search' }],
          });
          await engine.gateToolCall(TENANT, sessionId, { callId, name: 'search' });
          await engine.appendMessage(TENANT, sessionId, { role: 'tool', content: `search result ${step}`, callId });
          // A long run says how the ratio moves: ten points on the way.
          if (STEPS >= 1_000 && step % (STEPS / 10) === 0) {
            const now = performance.now();
            const rate = ((step - lastPoint.step) * 1_000) / (now - lastPoint.at);
            stepMs += now - lastPoint.at;
            const at = await measure(redis, prefix, sessionId);
            lastPoint = { at: performance.now(), step };
            const point = `${step} steps`;
            Object.assign(figures, {
              [`MEMORY USAGE bytes at ${point}`]: at.usage,
              [`log entry JSON bytes at ${point}`]: at.logBytes,
              [`steps/s up to ${point}`]: round(rate),
              [`seconds to ${point}`]: round(stepMs / 1_000),
            });
            progress(
              `S8 after ${step} steps (${round(stepMs / 1_000)} s of steps, ${round(rate)} steps/s since the last point): ${at.usage} bytes for ${at.logBytes} bytes of log (${round(at.usage / at.logBytes)}); ${JSON.stringify(at.perKey)}`,
            );
          }
        }
        const { keys, usage, perKey, entries, logBytes } = await measure(redis, prefix, sessionId);
        ratios.push(usage / logBytes);
        Object.assign(figures, {
          'keys of the session': keys.length,
          'log entries': entries,
          'MEMORY USAGE bytes': usage,
          'log entry JSON bytes': logBytes,
          'request-id records': await redis.hlen(`${prefix}:{${sessionId}}:requests`),
          'call records': await redis.hlen(`${prefix}:{${sessionId}}:calls`),
          'app request keys': await redis.hlen(`${prefix}:{${sessionId}}:keys`),
          ...perKey,
        });
        progress(`S8 trial ${trial + 1}: ${usage} bytes in ${keys.length} keys for ${logBytes} bytes of log`);
      } finally {
        await deleteByPrefix(redis, prefix);
      }
    }
  } finally {
    await redis.quit();
  }
  const ratio = summarize(ratios);
  const goal = { op: '<=' as const, value: 2 };
  return [
    {
      id: 'S8',
      title: `Redis memory of a session after ${STEPS} steps`,
      ratioOf: "MEMORY USAGE of every key of the session's hash tag / JSON bytes of its rows and messages",
      goal,
      ratio: { ...ratio, median: round(ratio.median), min: round(ratio.min), max: round(ratio.max) },
      met: meets(goal, ratio.median),
      cpuMsPer1k: {},
      figures,
      notes: [
        'per step, nothing held: a user message, a keyed app notice, the delta step (rows, step record), an assistant tool call, its gate decision, its answer',
      ],
    },
  ];
}
