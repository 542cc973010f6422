import { sessionRecordKey } from '@ctxflow/subscriptions';

/**
 * Every Redis key shape of the session store, in one place (the meta's is
 * @ctxflow/subscriptions' sessionRecordKey: other services read a session's owner there).
 *
 * All keys of one session share the hash tag `{<sessionId>}`, so a Lua script
 * may touch them all on a Redis Cluster (one slot). Agents live in their own
 * slot (`{agent:<agentId>}`), and so does each tenant's session index
 * (`{tenant:<tenant>}`): neither is ever written in the same script as a session.
 */
export interface SessionKeys {
  /**
   * String: the SessionMeta as JSON (its counters may be older than `counters`'s). Its presence
   * is the session's existence; its `tenant` is the session's owner, which step-context
   * reads (sessionRecordKey).
   */
  meta: string;
  /** List: one LogEntry as JSON per element; element i has `seq` i. */
  log: string;
  /** List: one QueuedItem as JSON per element, `itemId` always its last property. */
  queue: string;
  /** Hash: app request key -> fingerprint of its items (R13). */
  keys: string;
  /** Set: `<callId>|<site>` of every call site that recorded (R10, R15). */
  sites: string;
  /** Hash: callId -> `<order> <CallRecord JSON>`; order is the first insertion's rank. */
  calls: string;
  /** Hash: stepId -> StepRecord JSON. */
  steps: string;
  /** Hash: requestId -> stepId. */
  requests: string;
  /**
   * Hash: the session's version and counters: `item` (last queue item number), `call` (last call order),
   * `version` (the session's write count: every session script that writes adds one),
   * `prompt` (the id of the system prompt the last step commit stored or used), and
   * `steps`, `stepAt`, `requestEnd`: the meta's steps, lastStepAt and lastRequestEnd when
   * the last write was a step commit that changed nothing else (read over the meta's).
   */
  counters: string;
  /** Hash: prompt id -> system prompt text, once per session for all its step records. */
  prompts: string;
  /**
   * Stream: the session's committed context rows waiting for their events (field `row`, a
   * LogEntry JSON), written by the commit script (KEYS[11]) when CTXFLOW_CONTEXT_ROW_EVENTS is on.
   */
  outbox: string;
}

/** The order in which session keys are passed to every session script (KEYS[1..10]). */
export const SESSION_KEY_ORDER = [
  'meta',
  'log',
  'queue',
  'keys',
  'sites',
  'calls',
  'steps',
  'requests',
  'counters',
  'prompts',
] as const satisfies readonly (keyof SessionKeys)[];

export interface StoreKeys {
  session(sessionId: string): SessionKeys;
  /** The session keys in SESSION_KEY_ORDER, as a script's KEYS. */
  sessionList(sessionId: string): string[];
  /** Hash: `record` (AgentRecord JSON) and `version`. */
  agent(agentId: string): string;
  /** Sorted set: sessionId scored by creation time (ms since the epoch). */
  tenantSessions(tenant: string): string;
  /**
   * Sorted set: `[tenant, sessionId]` JSON of every session of row-outbox shard `shard` whose
   * outbox may hold entries, scored by the time (µs) of the last commit that marked it; one
   * slot per shard (`{outbox:<shard>}`).
   */
  outboxIndex(shard: number): string;
  /** String: the relay holding row-outbox shard `shard`, with a TTL (redis-row-outbox.ts). */
  outboxLease(shard: number): string;
}

/**
 * Key builder for `prefix` (default `ctx`): `ctx:{<sessionId>}:meta`, `ctx:{agent:<agentId>}`,
 * `ctx:{tenant:<tenant>}:sessions`. The prefix must not contain braces (it would move the hash tag).
 */
export function storeKeys(prefix = 'ctx'): StoreKeys {
  if (prefix.includes('{') || prefix.includes('}')) {
    throw new Error(`the session store key prefix must not contain braces: ${JSON.stringify(prefix)}`);
  }
  const session = (sessionId: string): SessionKeys => {
    if (sessionId === '') throw new Error('a session id must not be empty (it is the hash tag)');
    const base = `${prefix}:{${sessionId}}`;
    return {
      meta: sessionRecordKey(prefix, sessionId),
      log: `${base}:log`,
      queue: `${base}:queue`,
      keys: `${base}:keys`,
      sites: `${base}:sites`,
      calls: `${base}:calls`,
      steps: `${base}:steps`,
      requests: `${base}:requests`,
      counters: `${base}:counters`,
      prompts: `${base}:prompts`,
      outbox: `${base}:outbox`,
    };
  };
  return {
    session,
    sessionList(sessionId) {
      const keys = session(sessionId);
      return SESSION_KEY_ORDER.map((name) => keys[name]);
    },
    agent: (agentId) => `${prefix}:{agent:${agentId}}`,
    tenantSessions: (tenant) => `${prefix}:{tenant:${tenant}}:sessions`,
    outboxIndex: (shard) => `${prefix}:{outbox:${shard}}:sessions`,
    outboxLease: (shard) => `${prefix}:{outbox:${shard}}:lease`,
  };
}

/**
 * Hash of the step usage store (redis-step-usage-store.ts): stepId -> StepUsage JSON, key
 * `<prefix>:{<sessionId>}:usage` (the session's hash tag; no session script touches it).
 */
export function stepUsageKey(prefix: string, sessionId: string): string {
  if (prefix.includes('{') || prefix.includes('}')) {
    throw new Error(`the session store key prefix must not contain braces: ${JSON.stringify(prefix)}`);
  }
  if (sessionId === '') throw new Error('a session id must not be empty (it is the hash tag)');
  return `${prefix}:{${sessionId}}:usage`;
}

/**
 * Hash of the topic id record (redis-topic-id-record.ts): partition -> the topic id the consumer
 * group began reading it in, key `<prefix>:session-runner:topic-ids:<group>:<topic>` (a topic
 * name holds no `:`, so no two groups and topics share a key).
 */
export function topicIdRecordKey(prefix: string, group: string, topic: string): string {
  if (prefix.includes('{') || prefix.includes('}')) {
    throw new Error(`the session store key prefix must not contain braces: ${JSON.stringify(prefix)}`);
  }
  return `${prefix}:session-runner:topic-ids:${group}:${topic}`;
}
