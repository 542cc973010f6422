/**
 * S8 session memory on Redis: the Redis `MEMORY USAGE` of every key of one session
 * (its hash tag `{<sessionId>}`) after 100 steps (`--s8-steps=N` for another length; the
 * figures then name each key's share, the step records' and the request-id records' among them), over the bytes of its rows and
 * messages (the JSON of its log entries as the store keeps them). Each step: a user
 * message, an app notice queued with an idempotency key, the step (its rows and step
 * record, with an agent's system prompt), an assistant message with a tool call, the
 * tool's answer. Goal: at most 2x. Past 1,000 steps the runner holds the session between
 * steps, and the tool call's record is written as the gate writes it (the store's putCall, the
 * same record) rather than through the gate: an unheld step and the gate read the session's
 * whole log, so a 10,000-step run through them takes hours; what Redis keeps is the same (the
 * same bytes at 300 and at 1,000 steps either way).
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
        const long = STEPS > 1_000;
        const engine = createEngine({ store, ...(long ? {} : { heldSessions: 0 }) });
        const agent = await engine.createAgent(TENANT, {
          context: [{ id: 'persona', content: 'You are a support engineer. Answer briefly and cite the ticket.' }],
          tools: [{ name: 'search', description: 'Searches the knowledge base.' }],
        });
        const { sessionId } = await engine.createSession(TENANT, { agentId: agent.agentId });
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
          await engine.step(TENANT, sessionId, { requestId: `req-${step}` });
          const callId = `call_${step}`;
          await engine.appendMessage(TENANT, sessionId, {
            role: 'assistant',
            content: `Step ${step}: searching.`,
            toolCalls: [{ callId, name: 'search' }],
          });
          if (!long) await engine.gateToolCall(TENANT, sessionId, { callId, name: 'search' });
          else await store.putCall(sessionId, { callId, name: 'search', stepIndex: step, status: 'executed' });
          await engine.appendMessage(TENANT, sessionId, { role: 'tool', content: `search result ${step}`, callId });
          // A long run says how the ratio moves: ten points on the way.
          if (STEPS >= 1_000 && step % (STEPS / 10) === 0 && step < STEPS) {
            const at = await measure(redis, prefix, sessionId);
            progress(
              `S8 after ${step} steps: ${at.usage} bytes for ${at.logBytes} bytes of log (${round(at.usage / at.logBytes)}); ${JSON.stringify(at.perKey)}`,
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
        'per step: a user message, a keyed app notice, the step (rows, step record), an assistant tool call, its answer',
      ],
    },
  ];
}
