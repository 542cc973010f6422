/**
 * The session store contract against every adapter: in memory, Redis, Redis Cluster;
 * then what only the Redis adapter promises (key layout, a dangling index entry,
 * store_unavailable, NOSCRIPT after a restart).
 *
 * Longer than 400 lines: the Redis adapter's own promises (key layout, NOSCRIPT, store_unavailable) need its private servers, started once here.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { loadLuaScript } from '@ctxflow/service-kit';
import {
  MemorySessionStore,
  RedisSessionStore,
  type SessionMeta,
  type StepCommit,
  type StepRecord,
} from '@ctxflow/session-runner';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { CachingSessionStore } from '../../services/session-runner/src/adapters/caching-session-store.ts';
import { keysOfSession } from '../../services/step-context/test/helpers.ts';
import { requireRedis, requireRedisCluster } from '../support/services.ts';
import { sessionStoreContract } from './session-store.contract.ts';

/** Deletes every key under `prefix` on every master (SCAN is per node on a cluster). */
async function deletePrefix(client: Redis | Cluster, prefix: string): Promise<void> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      cursor = next;
      // One DEL per key: on a cluster the keys of one page live in many slots.
      for (const key of keys) await node.del(key);
    } while (cursor !== '0');
  }
}

/** The SHA1 under which Redis caches enqueue.lua, its includes resolved (what EVALSHA names). */
const ENQUEUE_SHA = createHash('sha1')
  .update(loadLuaScript(new URL('../../services/session-runner/src/adapters/redis/enqueue.lua', import.meta.url)))
  .digest('hex');

const uniquePrefix = () => `ctxtest-${randomUUID().slice(0, 12)}`;

sessionStoreContract('memory', async (options) => ({
  store: new MemorySessionStore(options),
  cleanup: async () => {},
}));

// The caching decorator the engine runs on is held to the same contract, over each kind of store.
sessionStoreContract('caching over memory', async (options) => ({
  store: new CachingSessionStore(new MemorySessionStore(options)),
  cleanup: async () => {},
}));

let redis: Redis | undefined;
function redisClient(): Redis {
  redis ??= new Redis(requireRedis(), { lazyConnect: false, maxRetriesPerRequest: 3 });
  return redis;
}

let cluster: Cluster | undefined;
function clusterClient(): Cluster {
  cluster ??= new Cluster(requireRedisCluster(), { redisOptions: { maxRetriesPerRequest: 3 } });
  return cluster;
}

afterAll(async () => {
  await redis?.quit();
  await cluster?.quit();
});

sessionStoreContract('redis', async (options) => {
  const client = redisClient();
  const prefix = uniquePrefix();
  return {
    store: new RedisSessionStore(client, { prefix, ...(options?.ttlMs === undefined ? {} : { ttlMs: options.ttlMs }) }),
    cleanup: () => deletePrefix(client, prefix),
    keysOf: (sessionId) => keysOfSession(client, prefix, sessionId),
  };
});

sessionStoreContract('redis cluster', async (options) => {
  const client = clusterClient();
  const prefix = uniquePrefix();
  return {
    store: new RedisSessionStore(client, { prefix, ...(options?.ttlMs === undefined ? {} : { ttlMs: options.ttlMs }) }),
    cleanup: () => deletePrefix(client, prefix),
    keysOf: (sessionId) => keysOfSession(client, prefix, sessionId),
  };
});

sessionStoreContract('caching over redis', async (options) => {
  const client = redisClient();
  const prefix = uniquePrefix();
  return {
    store: new CachingSessionStore(
      new RedisSessionStore(client, { prefix, ...(options?.ttlMs === undefined ? {} : { ttlMs: options.ttlMs }) }),
    ),
    cleanup: () => deletePrefix(client, prefix),
    keysOf: (sessionId) => keysOfSession(client, prefix, sessionId),
  };
});

function meta(overrides: Partial<SessionMeta> = {}): SessionMeta {
  return {
    sessionId: `ses_${randomUUID()}`,
    tenant: `tenant-${randomUUID()}`,
    createdAt: '2026-01-01T00:00:00.000Z',
    thread: { live: [] },
    forceRefresh: false,
    steps: 0,
    ...overrides,
  };
}

/** A step of no rows on a session whose state is `read` (log, version), with system prompt `system`. */
function promptStep(read: { meta: SessionMeta; log: unknown[]; version: string }, system: string): StepCommit {
  const ordinal = read.meta.steps + 1;
  const step: StepRecord = {
    stepId: `stp_${randomUUID()}`,
    ordinal,
    mode: 'first',
    runId: 'run_1',
    logStart: read.log.length,
    logEnd: read.log.length,
    rowIds: [],
    system,
    activeTools: ['__finish__'],
    cache: { rebuilt: ordinal === 1 },
    at: '2026-01-01T00:00:00.000Z',
  };
  return {
    step,
    rows: [],
    drain: [],
    expectedLogLength: read.log.length,
    expectedVersion: read.version,
    meta: { ...read.meta, steps: ordinal },
  };
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => done(port));
    });
  });
}

/** A private redis-server (no persistence) on `port`, ready when it answers PING. */
async function startRedisServer(port: number): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  const failed = new Promise<never>((_, fail) => child.once('error', fail));
  const probe = new Redis(port, '127.0.0.1', {
    lazyConnect: true,
    retryStrategy: () => 50,
    maxRetriesPerRequest: null,
  });
  probe.on('error', () => {});
  try {
    await Promise.race([probe.ping(), failed]);
  } finally {
    probe.disconnect();
  }
  return child;
}

async function stopRedisServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGTERM');
  await exited;
}

describe('RedisSessionStore', () => {
  it('keeps every key of a session under its hash tag, agents and the tenant index in their own', async () => {
    const client = redisClient();
    const prefix = uniquePrefix();
    onTestFinished(() => deletePrefix(client, prefix));
    const store = new RedisSessionStore(client, { prefix });
    const m = meta();
    await store.createSession(m, [], [], []);
    await store.enqueue(m.sessionId, [{ item: { kind: 'notice', source: 'app', content: 'a' }, at: m.createdAt }], {
      type: 'key',
      key: 'k',
      fingerprint: 'f',
    });
    await store.putAgent({
      agentId: 'agt_1',
      tenant: m.tenant,
      context: [],
      tools: [],
      stepContext: { maxBytes: 1, timeoutMs: 1 },
      memory: { autoInject: false },
      cacheTtlMs: 1,
      createdAt: m.createdAt,
      version: 1,
    });
    const keys = (await client.keys(`${prefix}:*`)).sort();
    expect(keys).toEqual(
      [
        `${prefix}:{${m.sessionId}}:keys`,
        `${prefix}:{${m.sessionId}}:meta`,
        `${prefix}:{${m.sessionId}}:queue`,
        `${prefix}:{${m.sessionId}}:counters`,
        `${prefix}:{agent:agt_1}`,
        `${prefix}:{tenant:${m.tenant}}:sessions`,
      ].sort(),
    );
  });

  it('never issues a version twice: after a restart lost the last writes, the next write has a new one', async () => {
    const client = redisClient();
    const prefix = uniquePrefix();
    onTestFinished(() => deletePrefix(client, prefix));
    const store = new RedisSessionStore(client, { prefix });
    const session = meta();
    const created = await store.createSession(session, [], [], []);
    const first = await store.enqueue(session.sessionId, [
      { item: { kind: 'notice', content: 'a', source: 'app' }, at: 'now' },
    ]);
    const lost = first.outcome === 'recorded' ? first.written.version : '';
    // What a Redis that lost its last second of writes holds: the version before them.
    await client.hset(`${prefix}:{${session.sessionId}}:counters`, 'version', created);
    const again = await store.enqueue(session.sessionId, [
      { item: { kind: 'notice', content: 'b', source: 'app' }, at: 'now' },
    ]);
    expect(again).toMatchObject({ outcome: 'recorded', written: { previous: created } });
    const issued = again.outcome === 'recorded' ? again.written.version : lost;
    expect(issued).not.toBe(lost);
    // Same write count, so only the time part tells them apart.
    expect(issued.split('.')[0]).toBe(lost.split('.')[0]);
  });

  it('a key or a prompt with a lone surrogate reaches the scripts as a plain argument would (U+FFFD)', async () => {
    const client = redisClient();
    const prefix = uniquePrefix();
    onTestFinished(() => deletePrefix(client, prefix));
    const store = new RedisSessionStore(client, { prefix });
    const m = meta();
    await store.createSession(m, [], [], []);
    const items = [{ item: { kind: 'notice' as const, content: 'a', source: 'app' as const }, at: 'now' }];
    const dedupe = { type: 'key' as const, key: 'key-\ud800', fingerprint: 'f' };
    expect(await store.enqueue(m.sessionId, items, dedupe)).toMatchObject({ outcome: 'recorded' });
    expect(await store.enqueue(m.sessionId, items, dedupe)).toEqual({ outcome: 'replayed' });
    expect(await store.keyFingerprint(m.sessionId, 'key-\ud800')).toBe('f');
    expect(await client.hkeys(`${prefix}:{${m.sessionId}}:keys`)).toEqual(['key-\ufffd']);
    const commit = promptStep((await store.load(m.sessionId))!, 'a prompt with \udc00 alone');
    expect(await store.commitStep(m.sessionId, commit)).toEqual({ outcome: 'committed', version: expect.any(String) });
    expect(Object.values(await client.hgetall(`${prefix}:{${m.sessionId}}:prompts`))).toEqual([
      'a prompt with \ufffd alone',
    ]);
  });

  it('listSessions skips an index entry whose session is gone and still fills the limit', async () => {
    const client = redisClient();
    const prefix = uniquePrefix();
    onTestFinished(() => deletePrefix(client, prefix));
    const store = new RedisSessionStore(client, { prefix });
    const tenant = `tenant-${randomUUID()}`;
    const older = meta({ tenant, createdAt: '2026-01-01T00:00:01.000Z' });
    const newer = meta({ tenant, createdAt: '2026-01-01T00:00:02.000Z' });
    await store.createSession(older, [], [], []);
    await store.createSession(newer, [], [], []);
    // The newest entry names a session that is not there (e.g. its keys were removed).
    await client.zadd(`${prefix}:{tenant:${tenant}}:sessions`, Date.parse('2026-01-01T00:00:03.000Z'), 'ses_gone');
    expect(await store.listSessions(tenant, 2)).toEqual([newer, older]);
    expect(await store.listSessions(tenant, 1)).toEqual([newer]);
  });

  it('stores a system prompt once per session; step records name it by id and read back with its text', async () => {
    const client = redisClient();
    const prefix = uniquePrefix();
    onTestFinished(() => deletePrefix(client, prefix));
    const store = new RedisSessionStore(client, { prefix });
    const m = meta();
    await store.createSession(m, [], [], []);
    const system = `You resolve support tickets. ${'Be precise. '.repeat(300)}`;
    const other = 'Another prefix, after a rebuild.';
    const committed: StepRecord[] = [];
    for (const text of [system, system, system, other, system]) {
      const commit = promptStep((await store.load(m.sessionId))!, text);
      expect(await store.commitStep(m.sessionId, commit)).toEqual({
        outcome: 'committed',
        version: expect.any(String),
      });
      committed.push(commit.step);
    }

    const base = `${prefix}:{${m.sessionId}}`;
    const stored = (await client.hvals(`${base}:steps`)).map((json) => JSON.parse(json));
    expect(stored).toHaveLength(5);
    for (const step of stored) {
      expect(step).not.toHaveProperty('system');
      expect(step.systemRef).toMatch(/^[\w-]{22}$/);
    }
    const prompts = await client.hgetall(`${base}:prompts`);
    expect(Object.values(prompts).sort()).toEqual([other, system].sort());
    expect(new Set(stored.map((step) => step.systemRef))).toEqual(new Set(Object.keys(prompts)));

    // Another process (nothing known in memory) reads the texts from the session.
    const fresh = new RedisSessionStore(client, { prefix });
    expect(await fresh.listSteps(m.sessionId)).toEqual(committed);
    expect(await fresh.getStep(m.sessionId, { stepId: committed[3]!.stepId })).toEqual(committed[3]);
    expect(await store.listSteps(m.sessionId)).toEqual(committed);
  });

  it('a commit naming a prompt the session does not name is refused and sent again with the text', async () => {
    const client = new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
    const prefix = uniquePrefix();
    onTestFinished(async () => {
      await deletePrefix(client, prefix);
      client.disconnect();
    });
    const store = new RedisSessionStore(client, { prefix });
    const sent: string[] = [];
    const commitScript = (client as unknown as Record<string, (...args: string[]) => Promise<unknown>>).ctxCommitStep!;
    (client as unknown as Record<string, unknown>).ctxCommitStep = (...args: string[]) => {
      // After the ten keys, the packed argument (commit-step.lua): the prompt's text, or none for its id alone.
      sent.push((JSON.parse(args[10]!) as { prompt?: { text?: string } }).prompt?.text ?? '');
      return commitScript.apply(client, args);
    };
    const m = meta();
    await store.createSession(m, [], [], []);
    await store.commitStep(m.sessionId, promptStep((await store.load(m.sessionId))!, 'prompt A'));
    const read = (await store.load(m.sessionId))!;
    // Then another runner stored another prompt (its `counters` hash names that one), and prompt A is not
    // stored (as if never written): this store still takes prompt A for the session's.
    const base = `${prefix}:{${m.sessionId}}`;
    await client.hset(`${base}:counters`, 'prompt', 'another-prompt-id');
    await client.del(`${base}:prompts`);
    const next = promptStep(read, 'prompt A');

    expect(await store.commitStep(m.sessionId, next)).toEqual({ outcome: 'committed', version: expect.any(String) });
    expect(sent).toEqual(['prompt A', '', 'prompt A']);
    expect(Object.values(await client.hgetall(`${base}:prompts`))).toEqual(['prompt A']);
    expect(await new RedisSessionStore(client, { prefix }).getStep(m.sessionId, { stepId: next.step.stepId })).toEqual(
      next.step,
    );
  });

  it('reads step records stored with their system prompt in them, and copies prompts into a branch', async () => {
    const client = redisClient();
    const prefix = uniquePrefix();
    onTestFinished(() => deletePrefix(client, prefix));
    const store = new RedisSessionStore(client, { prefix });
    const m = meta();
    await store.createSession(m, [], [], []);
    const commit = promptStep((await store.load(m.sessionId))!, 'the prompt');
    await store.commitStep(m.sessionId, commit);
    // A record as the store wrote it before prompts were stored apart.
    const old: StepRecord = { ...commit.step, stepId: `stp_${randomUUID()}`, ordinal: 2, system: 'an older prompt' };
    await client.hset(`${prefix}:{${m.sessionId}}:steps`, old.stepId, JSON.stringify(old));
    const steps = await new RedisSessionStore(client, { prefix }).listSteps(m.sessionId);
    expect(steps).toEqual([commit.step, old]);

    const branch = meta({ tenant: m.tenant });
    await store.createSession(branch, [], steps, []);
    const copied = (await client.hvals(`${prefix}:{${branch.sessionId}}:steps`)).map((json) => JSON.parse(json));
    expect(copied.every((step) => step.system === undefined && typeof step.systemRef === 'string')).toBe(true);
    expect(Object.values(await client.hgetall(`${prefix}:{${branch.sessionId}}:prompts`)).sort()).toEqual([
      'an older prompt',
      'the prompt',
    ]);
    expect(await new RedisSessionStore(client, { prefix }).listSteps(branch.sessionId)).toEqual(steps);
  });

  it('a commit that changes only the meta counters writes them apart; every read gives the whole meta', async () => {
    const client = redisClient();
    const prefix = uniquePrefix();
    onTestFinished(() => deletePrefix(client, prefix));
    const store = new RedisSessionStore(client, { prefix });
    const m = meta();
    await store.createSession(m, [], [], []);
    const first = promptStep((await store.load(m.sessionId))!, 'the prompt');
    first.meta = { ...first.meta, lastStepAt: 1_000, lastRequestEnd: 0 };
    await store.commitStep(m.sessionId, first);
    const base = `${prefix}:{${m.sessionId}}`;
    const metaJson = await client.get(`${base}:meta`);

    const read = (await store.load(m.sessionId))!;
    const next = promptStep(read, 'the prompt');
    next.meta = { ...next.meta, lastStepAt: 2_000, lastRequestEnd: 0 };
    next.countersOnly = true;
    expect(await store.commitStep(m.sessionId, next)).toEqual({ outcome: 'committed', version: expect.any(String) });
    expect(await client.get(`${base}:meta`)).toBe(metaJson);
    expect(await client.hmget(`${base}:counters`, 'steps', 'stepAt', 'requestEnd')).toEqual(['2', '2000', '0']);
    expect((await store.load(m.sessionId))?.meta).toEqual(next.meta);
    expect(await store.getMeta(m.sessionId)).toEqual(next.meta);
    expect(await store.listSessions(m.tenant, 10)).toEqual([next.meta]);

    // A whole meta again (a thread edit): the counters apart are dropped.
    const edited = { ...next.meta, forceRefresh: true };
    expect(await store.putMeta(edited)).toBe(true);
    expect(await client.hmget(`${base}:counters`, 'steps', 'stepAt', 'requestEnd')).toEqual([null, null, null]);
    expect((await store.load(m.sessionId))?.meta).toEqual(edited);

    // Without a version to name, countersOnly writes the whole meta.
    const unversioned = { ...promptStep((await store.load(m.sessionId))!, 'the prompt'), countersOnly: true };
    unversioned.meta = { ...unversioned.meta, lastStepAt: 3_000, lastRequestEnd: 0 };
    delete unversioned.expectedVersion;
    expect(await store.commitStep(m.sessionId, unversioned)).toEqual({
      outcome: 'committed',
      version: expect.any(String),
    });
    expect(JSON.parse((await client.get(`${base}:meta`))!)).toEqual(unversioned.meta);
    expect((await store.load(m.sessionId))?.meta).toEqual(unversioned.meta);
  });

  it('refuses a key prefix with braces (it would move the hash tag)', () => {
    expect(() => new RedisSessionStore(redisClient(), { prefix: 'a{b}' })).toThrow(/braces/);
  });

  it('a Redis that does not answer is store_unavailable (retryable)', async () => {
    const port = await freePort();
    const client = new Redis(port, '127.0.0.1', {
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    client.on('error', () => {});
    onTestFinished(() => client.disconnect());
    const store = new RedisSessionStore(client, { prefix: uniquePrefix() });
    for (const attempt of [() => store.load('ses_1'), () => store.enqueue('ses_1', []), () => store.getAgent('a')]) {
      await expect(attempt()).rejects.toMatchObject({ code: 'store_unavailable', retryable: true, status: 503 });
    }
  });

  it('scripts run again after the Redis restarts (NOSCRIPT recovered by the client)', async () => {
    const port = await freePort();
    let server = await startRedisServer(port);
    onTestFinished(() => stopRedisServer(server));
    const client = new Redis(port, '127.0.0.1', { retryStrategy: () => 50, maxRetriesPerRequest: 50 });
    client.on('error', () => {});
    onTestFinished(() => client.disconnect());
    const store = new RedisSessionStore(client, { prefix: uniquePrefix() });
    const item = {
      item: { kind: 'notice' as const, source: 'app' as const, content: 'a' },
      at: '2026-01-01T00:00:00Z',
    };

    const before = meta();
    await store.createSession(before, [], [], []);
    expect(await store.enqueue(before.sessionId, [item])).toMatchObject({ outcome: 'recorded' });
    expect(await client.script('EXISTS', ENQUEUE_SHA)).toEqual([1]);

    // A restarted Redis without persistence has no scripts (and no data).
    await stopRedisServer(server);
    server = await startRedisServer(port);
    expect(await client.script('EXISTS', ENQUEUE_SHA)).toEqual([0]);

    const after = meta();
    const created = await store.createSession(after, [], [], []);
    const enqueued = await store.enqueue(after.sessionId, [item]);
    const loaded = await store.load(after.sessionId);
    expect(enqueued).toEqual({
      outcome: 'recorded',
      items: [{ ...item, itemId: 'itm_1' }],
      written: { previous: created, version: loaded?.version },
    });
    expect(loaded?.queue).toEqual([{ ...item, itemId: 'itm_1' }]);
    expect(await client.script('EXISTS', ENQUEUE_SHA)).toEqual([1]);
  });
});
