/**
 * The session store contract: every adapter of the port in
 * services/session-runner/src/ports/session-store.ts passes these tests
 * (the in-memory store, the Redis store on a real Redis and a Redis Cluster, and the
 * caching decorator the engine runs on, over the in-memory and the Redis store).
 *
 * Longer than 400 lines: it is the whole port's contract, one describe per member, so that every adapter is held to all of it by one call.
 */
import { randomUUID } from 'node:crypto';
import type { SourcedItem } from '@ctxflow/contracts';
import type {
  AgentRecord,
  CallRecord,
  Clock,
  LogEntry,
  MessageEntry,
  NewQueuedItem,
  QueuedItem,
  RewindCommit,
  RowEntry,
  SessionMeta,
  SessionStore,
  StepCommit,
  StepRecord,
  Written,
} from '@ctxflow/session-runner';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

/** A store's retention (CTXFLOW_SESSION_TTL_MS) and clock (the memory store's; Redis keeps time itself). */
export interface SessionStoreOptions {
  ttlMs?: number;
  clock?: Clock;
}

export type SessionStoreFactory = (options?: SessionStoreOptions) => Promise<{
  store: SessionStore;
  cleanup(): Promise<void>;
  /** A store with keys: every key of the session's hash tag with its PTTL (ms; -1 none). */
  keysOf?(sessionId: string): Promise<{ key: string; pttl: number }[]>;
}>;

const T0 = Date.parse('2026-01-01T00:00:00Z');
const iso = (offsetMs = 0) => new Date(T0 + offsetMs).toISOString();

function agentRecord(overrides: Partial<AgentRecord> = {}): AgentRecord {
  return {
    agentId: `agt_${randomUUID()}`,
    tenant: 'tenant-a',
    context: [{ id: 'persona', content: 'You help with tickets.' }],
    tools: [{ name: 'search' }, { name: '__finish__', description: 'Call when the task is complete.' }],
    stepContext: { maxBytes: 32_768, timeoutMs: 5_000 },
    memory: { autoInject: false },
    cacheTtlMs: 300_000,
    createdAt: iso(),
    version: 1,
    ...overrides,
  };
}

function sessionMeta(overrides: Partial<SessionMeta> = {}): SessionMeta {
  return {
    sessionId: `ses_${randomUUID()}`,
    tenant: 'tenant-a',
    createdAt: iso(),
    thread: { live: [{ content: 'Ticket 42' }] },
    forceRefresh: false,
    steps: 0,
    ...overrides,
  };
}

const note = (content: string, source: SourcedItem['source'] = 'app'): SourcedItem => ({
  kind: 'notice',
  source,
  content,
});

const newItem = (content: string, extra: Partial<NewQueuedItem> = {}): NewQueuedItem => ({
  item: note(content),
  at: iso(),
  ...extra,
});

function message(content: string, role: MessageEntry['role'] = 'user'): Omit<MessageEntry, 'seq'> {
  return { type: 'message', role, content, at: iso() };
}

function row(seq: number, stepId: string, content: string, queued?: QueuedItem): RowEntry {
  const entry: RowEntry = {
    type: 'row',
    seq,
    stepId,
    at: iso(),
    row: { id: `${stepId}.${seq}`, role: 'context', kind: 'notice', source: queued ? 'app' : 'hook', content },
  };
  if (queued) {
    entry.itemId = queued.itemId;
    entry.queued = queued;
  }
  return entry;
}

function stepRecord(overrides: Partial<StepRecord> & { stepId: string; logStart: number; logEnd: number }): StepRecord {
  return {
    ordinal: 1,
    mode: 'first',
    runId: 'run_1',
    rowIds: [],
    system: 'system prefix',
    activeTools: ['search', '__finish__'],
    cache: { rebuilt: true, reason: 'new_thread' },
    at: iso(),
    ...overrides,
  };
}

/** A commit of `rows` (hook rows, or queued items when given) at the end of a log of `length`. */
function stepCommit(
  meta: SessionMeta,
  length: number,
  options: {
    stepId?: string;
    requestId?: string;
    ordinal?: number;
    delivered?: QueuedItem[];
    hookRows?: string[];
  } = {},
): StepCommit {
  const stepId = options.stepId ?? `stp_${randomUUID()}`;
  const rows: RowEntry[] = [];
  for (const queued of options.delivered ?? []) rows.push(row(length + rows.length, stepId, contentOf(queued), queued));
  for (const content of options.hookRows ?? []) rows.push(row(length + rows.length, stepId, content));
  const ordinal = options.ordinal ?? meta.steps + 1;
  const step = stepRecord({
    stepId,
    ordinal,
    logStart: length,
    logEnd: length + rows.length,
    rowIds: rows.map((r) => r.row.id),
    ...(options.requestId === undefined ? {} : { requestId: options.requestId }),
  });
  return {
    step,
    rows,
    drain: (options.delivered ?? []).map((q) => q.itemId),
    expectedLogLength: length,
    meta: { ...structuredClone(meta), steps: ordinal, lastStepAt: T0 + ordinal, lastRequestEnd: length + rows.length },
  };
}

/** The text of a queued item (tools items have none). */
const contentOf = (queued: QueuedItem): string => ('content' in queued.item ? queued.item.content : '');

function itemNumber(itemId: string): number {
  const match = /(\d+)$/.exec(itemId);
  if (!match) throw new Error(`item id ${itemId} has no number`);
  return Number(match[1]);
}

/** A rewind of the whole log of `length`, computed on that length, dropping nothing else. */
function rewindAll(meta: SessionMeta, length: number): RewindCommit {
  return { expectedLogLength: length, toLength: 0, requeue: [], dropItems: [], dropCalls: [], dropSteps: [], meta };
}

/** A commit's answer; its version is checked in 'versions'. */
const COMMITTED = { outcome: 'committed', version: expect.any(String) };

export function sessionStoreContract(name: string, factory: SessionStoreFactory): void {
  describe(`SessionStore contract: ${name}`, () => {
    let store: SessionStore;
    let cleanup: () => Promise<void>;
    let keysOf: ((sessionId: string) => Promise<{ key: string; pttl: number }[]>) | undefined;

    beforeEach(async () => {
      ({ store, cleanup, keysOf } = await factory());
    });
    afterEach(async () => {
      await cleanup();
    });

    /** A new session with an empty log; returns its meta. */
    async function newSession(overrides: Partial<SessionMeta> = {}): Promise<SessionMeta> {
      const meta = sessionMeta(overrides);
      await store.createSession(meta, [], [], []);
      return meta;
    }

    async function queued(sessionId: string, ...contents: string[]): Promise<QueuedItem[]> {
      const result = await store.enqueue(
        sessionId,
        contents.map((c) => newItem(c)),
      );
      if (result.outcome !== 'recorded') throw new Error(`enqueue: ${result.outcome}`);
      return result.items;
    }

    // ------------------------------------------------------------ data lifecycle

    describe('data lifecycle', () => {
      /** A session with every kind of record: log rows, a queue, a key, a site, a call, a step, a prompt. */
      async function fullSession(overrides: Partial<SessionMeta> = {}): Promise<SessionMeta> {
        const meta = await newSession(overrides);
        const id = meta.sessionId;
        await store.appendMessages(id, [message('hello')]);
        const keyed = await store.enqueue(id, [newItem('keyed')], { type: 'key', key: 'k1', fingerprint: 'f1' });
        if (keyed.outcome !== 'recorded') throw new Error(keyed.outcome);
        await store.enqueue(id, [newItem('sited')], { type: 'site', callId: 'call_1', site: 'hook:a' });
        await store.putCall(id, { callId: 'call_1', name: 'search', stepIndex: 0, status: 'executed' });
        const commit = stepCommit(meta, 1, { delivered: keyed.items, requestId: 'req_1' });
        expect(await store.commitStep(id, commit)).toEqual(COMMITTED);
        await store.enqueue(id, [newItem('still queued')]);
        return commit.meta;
      }

      it('erasure: deleteSession erases every record and the tenant list entry; a repeat does nothing', async () => {
        const tenant = `tenant-${randomUUID()}`;
        const meta = await fullSession({ tenant });
        const other = await fullSession({ tenant });
        const id = meta.sessionId;
        if (keysOf) expect((await keysOf(id)).length).toBeGreaterThan(0);

        await store.deleteSession(id);
        expect(await store.getMeta(id)).toBeUndefined();
        expect(await store.load(id)).toBeUndefined();
        expect(await store.keyFingerprint(id, 'k1')).toBeUndefined();
        expect(await store.getStep(id, { requestId: 'req_1' })).toBeUndefined();
        expect(await store.listSteps(id)).toEqual([]);
        expect((await store.listSessions(tenant, 10)).map((m) => m.sessionId)).toEqual([other.sessionId]);
        expect(await store.enqueue(id, [newItem('late')])).toEqual({ outcome: 'not_found' });
        expect(
          await store.putCall(id, { callId: 'call_2', name: 'x', stepIndex: 0, status: 'executed' }),
        ).toBeUndefined();
        if (keysOf) expect(await keysOf(id)).toEqual([]);

        await store.deleteSession(id); // idempotent
        await store.deleteSession(`ses_${randomUUID()}`); // never existed
        expect(await store.load(id)).toBeUndefined();
        // The other session (a branch is a session of its own) is whole.
        expect((await store.load(other.sessionId))?.log.length).toBeGreaterThan(0);
        // The id may be used again, from nothing.
        await store.createSession(sessionMeta({ sessionId: id, tenant }), [], [], []);
        expect((await store.load(id))?.log).toEqual([]);
        expect(await store.keyFingerprint(id, 'k1')).toBeUndefined();
      });

      it('sessionsOfAgent names the tenant sessions of one agent; deleteAgent removes it, idempotently', async () => {
        const tenant = `tenant-${randomUUID()}`;
        const agent = agentRecord({ tenant });
        await store.putAgent(agent);
        const a = await newSession({ tenant, agentId: agent.agentId });
        const b = await newSession({ tenant, agentId: agent.agentId });
        await newSession({ tenant, agentId: `agt_${randomUUID()}` });
        await newSession({ tenant: `tenant-${randomUUID()}`, agentId: agent.agentId });
        expect((await store.sessionsOfAgent(tenant, agent.agentId)).sort()).toEqual([a.sessionId, b.sessionId].sort());
        await store.deleteSession(a.sessionId);
        expect(await store.sessionsOfAgent(tenant, agent.agentId)).toEqual([b.sessionId]);

        await store.deleteAgent(agent.agentId);
        expect(await store.getAgent(agent.agentId)).toBeUndefined();
        await store.deleteAgent(agent.agentId);
        expect(await store.getAgent(agent.agentId)).toBeUndefined();
      });

      it("retention: every write refreshes all of a session's records; idle past the TTL, all are gone", async () => {
        const ttlMs = 60_000;
        let now = T0;
        const clock = { now: () => now };
        const made = await factory({ ttlMs, clock });
        try {
          const s = made.store;
          const tenant = `tenant-${randomUUID()}`;
          const meta = sessionMeta({ tenant });
          const id = meta.sessionId;
          await s.createSession(meta, [], [], []);
          now += 50_000;
          await s.appendMessages(id, [message('hello')]);
          const keyed = await s.enqueue(id, [newItem('keyed')], { type: 'key', key: 'k1', fingerprint: 'f1' });
          if (keyed.outcome !== 'recorded') throw new Error(keyed.outcome);
          const commit = stepCommit(meta, 1, { delivered: keyed.items, requestId: 'req_1' });
          expect(await s.commitStep(id, commit)).toEqual(COMMITTED);
          await s.putCall(id, { callId: 'call_1', name: 'search', stepIndex: 0, status: 'executed' });
          if (made.keysOf) {
            // Redis keeps time itself: right after a write, every key of the session expires within the TTL.
            const keys = await made.keysOf(id);
            expect(keys.map((k) => k.key.replace(/^.*\}:/, '')).sort()).toEqual(
              ['calls', 'counters', 'keys', 'log', 'meta', 'prompts', 'requests', 'steps'].sort(),
            );
            for (const { key, pttl } of keys) {
              expect(pttl, key).toBeGreaterThan(0);
              expect(pttl, key).toBeLessThanOrEqual(ttlMs);
            }
            return;
          }
          // 50 s after creation, 50 s after its last write: the write refreshed it.
          now += 50_000;
          expect((await s.load(id))?.log.length).toBe(2);
          expect(await s.keyFingerprint(id, 'k1')).toBe('f1');
          now += 10_000; // idle for the whole TTL
          expect(await s.getMeta(id)).toBeUndefined();
          expect(await s.load(id)).toBeUndefined();
          expect(await s.keyFingerprint(id, 'k1')).toBeUndefined();
          expect(await s.getStep(id, { requestId: 'req_1' })).toBeUndefined();
          expect(await s.listSessions(tenant, 10)).toEqual([]);
          expect(await s.enqueue(id, [newItem('late')])).toEqual({ outcome: 'not_found' });
        } finally {
          await made.cleanup();
        }
      });

      it('retention: an idle session leaves the tenant list too; a write to another session does not keep it', async () => {
        let now = T0;
        const made = await factory({ ttlMs: 1_000, clock: { now: () => now } });
        try {
          const tenant = `tenant-${randomUUID()}`;
          const idle = sessionMeta({ tenant });
          await made.store.createSession(idle, [], [], []);
          if (made.keysOf) {
            for (const { pttl } of await made.keysOf(idle.sessionId)) expect(pttl).toBeGreaterThan(0);
            return;
          }
          now += 1_000;
          // Another session's write (the memory store sweeps then) keeps only that one.
          await made.store.createSession(sessionMeta({ tenant }), [], [], []);
          expect((await made.store.listSessions(tenant, 10)).map((m) => m.sessionId)).not.toContain(idle.sessionId);
        } finally {
          await made.cleanup();
        }
      });
    });

    // ------------------------------------------------------------ agents

    describe('agents', () => {
      it('putAgent stores an agent that getAgent returns; an unknown agent is undefined', async () => {
        const agent = agentRecord({ model: 'model-a' });
        await store.putAgent(agent);
        expect(await store.getAgent(agent.agentId)).toEqual(agent);
        expect(await store.getAgent(`agt_${randomUUID()}`)).toBeUndefined();
      });

      it('replaceAgent replaces only while the version is the expected one', async () => {
        const agent = agentRecord();
        await store.putAgent(agent);
        const next = { ...agent, version: 2, model: 'model-b' };
        expect(await store.replaceAgent(next, 1)).toBe(true);
        expect(await store.getAgent(agent.agentId)).toEqual(next);

        const stale = { ...agent, version: 2, model: 'model-c' };
        expect(await store.replaceAgent(stale, 1)).toBe(false);
        expect(await store.getAgent(agent.agentId)).toEqual(next);
      });

      it('replaceAgent of an unknown agent is false and stores nothing', async () => {
        const agent = agentRecord();
        expect(await store.replaceAgent({ ...agent, version: 2 }, 1)).toBe(false);
        expect(await store.getAgent(agent.agentId)).toBeUndefined();
      });

      it('agents are copies: changing what was given or returned changes nothing stored', async () => {
        const agent = agentRecord();
        const original = structuredClone(agent);
        await store.putAgent(agent);
        agent.context[0]!.content = 'changed after put';
        const got = await store.getAgent(agent.agentId);
        got!.tools.push({ name: 'injected' });
        expect(await store.getAgent(agent.agentId)).toEqual(original);
      });
    });

    // ------------------------------------------------------------ sessions

    describe('sessions', () => {
      it('createSession stores meta with an empty log, queue and calls; an unknown session loads undefined', async () => {
        const meta = sessionMeta({ agentId: 'agt_1' });
        const version = await store.createSession(meta, [], [], []);
        expect(version).toMatch(/\S/);
        expect(await store.load(meta.sessionId)).toEqual({
          meta,
          log: [],
          queue: [],
          calls: [],
          sites: [],
          itemSeq: 0,
          requestIds: [],
          version,
        });
        expect(await store.listSteps(meta.sessionId)).toEqual([]);
        expect(await store.load(`ses_${randomUUID()}`)).toBeUndefined();
      });

      it('createSession copies an initial log, steps and calls (a branch), never a queue', async () => {
        const meta = sessionMeta({ steps: 2, branchOf: { sessionId: 'ses_parent', atStepId: 'stp_b' } });
        const log: LogEntry[] = [
          { ...message('hello'), seq: 0 } as MessageEntry,
          row(1, 'stp_a', 'first row'),
          { ...message('answer', 'assistant'), seq: 2 } as MessageEntry,
          row(3, 'stp_b', 'second row'),
        ];
        const steps = [
          stepRecord({ stepId: 'stp_b', ordinal: 2, logStart: 3, logEnd: 4, requestId: 'req_b' }),
          stepRecord({ stepId: 'stp_a', ordinal: 1, logStart: 1, logEnd: 2, requestId: 'req_a' }),
        ];
        const calls: CallRecord[] = [
          { callId: 'call_2', name: 'search', stepIndex: 1, status: 'executed' },
          { callId: 'call_1', name: 'search', stepIndex: 0, status: 'refused', reason: 'tool_inactive' },
        ];
        const version = await store.createSession(meta, log, steps, calls, {
          sites: ['call_2|tool:search', 'call_2|hook:audit'],
          itemSeq: 7,
        });

        const loaded = await store.load(meta.sessionId);
        expect({
          ...loaded,
          sites: [...(loaded?.sites ?? [])].sort(),
          requestIds: [...(loaded?.requestIds ?? [])].sort(),
        }).toEqual({
          meta,
          log,
          queue: [],
          calls,
          sites: ['call_2|hook:audit', 'call_2|tool:search'],
          itemSeq: 7,
          requestIds: ['req_a', 'req_b'],
          version,
        });
        // The carried call site is known (first wins), and item ids continue after the carried counter.
        expect(
          await store.enqueue(meta.sessionId, [newItem('again')], {
            type: 'site',
            callId: 'call_2',
            site: 'tool:search',
          }),
        ).toEqual({ outcome: 'replayed' });
        const added = await store.enqueue(meta.sessionId, [newItem('next')]);
        expect(added.outcome === 'recorded' && added.items.map((i) => i.itemId)).toEqual(['itm_8']);
        expect(await store.listSteps(meta.sessionId)).toEqual([steps[1], steps[0]]);
        expect(await store.getStep(meta.sessionId, { stepId: 'stp_a' })).toEqual(steps[1]);
        expect(await store.getStep(meta.sessionId, { requestId: 'req_b' })).toEqual(steps[0]);
        // The copied request ids are known: a step with one of them is a duplicate.
        const again = stepCommit(meta, 4, { requestId: 'req_a', hookRows: ['x'], ordinal: 3 });
        expect(await store.commitStep(meta.sessionId, again)).toEqual({ outcome: 'duplicate', step: steps[1] });
      });

      it('createSession of an existing session rejects and changes nothing', async () => {
        const meta = await newSession();
        await store.enqueue(meta.sessionId, [newItem('kept')]);
        const before = await store.load(meta.sessionId);
        await expect(
          store.createSession({ ...meta, tenant: 'tenant-b' }, [{ ...message('x'), seq: 0 } as MessageEntry], [], []),
        ).rejects.toThrow();
        expect(await store.load(meta.sessionId)).toEqual(before);
      });

      it("listSessions gives a tenant's sessions newest first, at most limit, no other tenant's", async () => {
        const tenant = `tenant-${randomUUID()}`;
        const first = await newSession({ tenant, createdAt: iso(1_000) });
        const second = await newSession({ tenant, createdAt: iso(2_000) });
        await newSession({ tenant: `other-${randomUUID()}`, createdAt: iso(2_500) });
        const third = await newSession({ tenant, createdAt: iso(3_000) });

        expect(await store.listSessions(tenant, 10)).toEqual([third, second, first]);
        expect(await store.listSessions(tenant, 2)).toEqual([third, second]);
        expect(await store.listSessions(`nobody-${randomUUID()}`, 10)).toEqual([]);
      });

      it('getMeta gives the meta alone, a copy; undefined for an unknown session', async () => {
        const meta = await newSession();
        const got = await store.getMeta(meta.sessionId);
        expect(got).toEqual(meta);
        got!.tenant = 'changed';
        expect(await store.getMeta(meta.sessionId)).toEqual(meta);
        expect(await store.getMeta(`ses_${randomUUID()}`)).toBeUndefined();
      });

      it('putMeta replaces the meta of a session; false for an unknown session', async () => {
        const meta = await newSession();
        const next = { ...meta, thread: { live: meta.thread.live, staged: [{ id: 't', content: 'staged' }] } };
        expect(await store.putMeta(next)).toBe(true);
        expect((await store.load(meta.sessionId))?.meta).toEqual(next);

        const ghost = sessionMeta();
        expect(await store.putMeta(ghost)).toBe(false);
        expect(await store.load(ghost.sessionId)).toBeUndefined();
      });

      it('sessions are copies: changing what was given or returned changes nothing stored', async () => {
        const meta = sessionMeta();
        const log: LogEntry[] = [{ ...message('hello'), seq: 0 } as MessageEntry];
        const version = await store.createSession(meta, log, [], []);
        const expected = {
          meta: structuredClone(meta),
          log: structuredClone(log),
          queue: [],
          calls: [],
          sites: [],
          itemSeq: 0,
          requestIds: [],
          version,
        };
        meta.thread.live.push({ content: 'changed after create' });
        (log[0] as MessageEntry).content = 'changed after create';

        const state = await store.load(meta.sessionId);
        state!.meta.steps = 99;
        state!.log.push({ ...message('pushed'), seq: 1 } as MessageEntry);
        const [listed] = await store.listSessions(expected.meta.tenant, 1);
        listed!.forceRefresh = true;
        expect(await store.load(meta.sessionId)).toEqual(expected);
      });
    });

    // ------------------------------------------------------------ enqueue

    describe('enqueue', () => {
      it('an unknown session is not_found', async () => {
        expect(await store.enqueue(`ses_${randomUUID()}`, [newItem('x')])).toEqual({ outcome: 'not_found' });
      });

      it('queues items in order with ids unique and increasing per session', async () => {
        const meta = await newSession();
        const a = await store.enqueue(meta.sessionId, [newItem('a'), newItem('b', { callId: 'c1', callStepIndex: 0 })]);
        const b = await store.enqueue(meta.sessionId, [newItem('c')]);
        expect(a.outcome).toBe('recorded');
        expect(b.outcome).toBe('recorded');
        const items = [...(a.outcome === 'recorded' ? a.items : []), ...(b.outcome === 'recorded' ? b.items : [])];
        expect(items.map(contentOf)).toEqual(['a', 'b', 'c']);
        expect(items[1]).toMatchObject({ callId: 'c1', callStepIndex: 0 });
        const numbers = items.map((q) => itemNumber(q.itemId));
        expect(numbers[1]! > numbers[0]! && numbers[2]! > numbers[1]!).toBe(true);
        expect((await store.load(meta.sessionId))?.queue).toEqual(items);
      });

      it('a key with the same fingerprint replays and writes nothing', async () => {
        const meta = await newSession();
        const dedupe = { type: 'key', key: 'k1', fingerprint: 'fp1' } as const;
        const first = await store.enqueue(meta.sessionId, [newItem('a')], dedupe);
        expect(first.outcome).toBe('recorded');
        expect(await store.enqueue(meta.sessionId, [newItem('a')], dedupe)).toEqual({ outcome: 'replayed' });
        expect((await store.load(meta.sessionId))?.queue).toEqual(first.outcome === 'recorded' ? first.items : []);
      });

      it('a key with another fingerprint conflicts and writes nothing, not even an item id', async () => {
        const meta = await newSession();
        const [a] = await queued(meta.sessionId, 'a');
        expect(
          await store.enqueue(meta.sessionId, [newItem('a')], { type: 'key', key: 'k1', fingerprint: 'fp1' }),
        ).toMatchObject({ outcome: 'recorded' });
        const before = await store.load(meta.sessionId);
        expect(
          await store.enqueue(meta.sessionId, [newItem('b'), newItem('c')], {
            type: 'key',
            key: 'k1',
            fingerprint: 'fp2',
          }),
        ).toEqual({ outcome: 'conflict' });
        expect(await store.load(meta.sessionId)).toEqual(before);
        // Another key records; its id follows the last recorded one (the refusal took none).
        const [next] = await queued(meta.sessionId, 'd');
        expect(itemNumber(next!.itemId)).toBe(itemNumber(a!.itemId) + 2);
      });

      it('keys are per session', async () => {
        const one = await newSession();
        const two = await newSession();
        const dedupe = { type: 'key', key: 'shared', fingerprint: 'fp1' } as const;
        expect((await store.enqueue(one.sessionId, [newItem('a')], dedupe)).outcome).toBe('recorded');
        expect((await store.enqueue(two.sessionId, [newItem('a')], { ...dedupe, fingerprint: 'fp2' })).outcome).toBe(
          'recorded',
        );
      });

      it('keyFingerprint: the fingerprint a key was recorded with, a read that writes nothing', async () => {
        const meta = await newSession();
        const other = await newSession();
        expect(await store.keyFingerprint(meta.sessionId, 'k1')).toBeUndefined();
        expect(await store.keyFingerprint(`ses_missing_${randomUUID()}`, 'k1')).toBeUndefined();
        await store.enqueue(meta.sessionId, [newItem('a')], { type: 'key', key: 'k1', fingerprint: 'fp1' });
        await store.enqueue(meta.sessionId, [newItem('s')], { type: 'site', callId: 'k2', site: 'tool:x' });
        const before = await store.load(meta.sessionId);
        expect(await store.keyFingerprint(meta.sessionId, 'k1')).toBe('fp1');
        // A replay and a conflict leave the record as it was; a call site is no request key.
        await store.enqueue(meta.sessionId, [newItem('a')], { type: 'key', key: 'k1', fingerprint: 'fp1' });
        await store.enqueue(meta.sessionId, [newItem('b')], { type: 'key', key: 'k1', fingerprint: 'fp2' });
        expect(await store.keyFingerprint(meta.sessionId, 'k1')).toBe('fp1');
        expect(await store.keyFingerprint(meta.sessionId, 'k2')).toBeUndefined();
        expect(await store.keyFingerprint(meta.sessionId, 'k2|tool:x')).toBeUndefined();
        // Keys are per session.
        expect(await store.keyFingerprint(other.sessionId, 'k1')).toBeUndefined();
        expect(await store.load(meta.sessionId)).toEqual(before);
      });

      it('a call site records first and only once; other sites and calls record', async () => {
        const meta = await newSession();
        const site = { type: 'site', callId: 'call_1', site: 'tool:search' } as const;
        const first = await store.enqueue(meta.sessionId, [newItem('first', { callId: 'call_1' })], site);
        expect(first.outcome).toBe('recorded');
        expect(await store.enqueue(meta.sessionId, [newItem('second', { callId: 'call_1' })], site)).toEqual({
          outcome: 'replayed',
        });
        expect(
          (await store.enqueue(meta.sessionId, [newItem('other site')], { ...site, site: 'hook:pre' })).outcome,
        ).toBe('recorded');
        expect(
          (await store.enqueue(meta.sessionId, [newItem('other call')], { ...site, callId: 'call_2' })).outcome,
        ).toBe('recorded');
        expect((await store.load(meta.sessionId))?.queue.map(contentOf)).toEqual(['first', 'other site', 'other call']);
      });

      it('concurrent enqueues under one key record exactly once', async () => {
        const meta = await newSession();
        const dedupe = { type: 'key', key: 'race', fingerprint: 'fp' } as const;
        const results = await Promise.all(
          Array.from({ length: 8 }, () => store.enqueue(meta.sessionId, [newItem('a'), newItem('b')], dedupe)),
        );
        expect(results.filter((r) => r.outcome === 'recorded')).toHaveLength(1);
        expect(results.filter((r) => r.outcome === 'replayed')).toHaveLength(7);
        expect((await store.load(meta.sessionId))?.queue.map(contentOf)).toEqual(['a', 'b']);
      });

      it('concurrent enqueues get distinct ids', async () => {
        const meta = await newSession();
        const results = await Promise.all(Array.from({ length: 10 }, (_, i) => queued(meta.sessionId, `n${i}`)));
        const ids = results.flat().map((q) => q.itemId);
        expect(new Set(ids).size).toBe(10);
        expect((await store.load(meta.sessionId))?.queue).toHaveLength(10);
      });

      it('returned items are copies', async () => {
        const meta = await newSession();
        const [item] = await queued(meta.sessionId, 'a');
        const expected = structuredClone(item);
        (item!.item as { content: string }).content = 'changed';
        expect((await store.load(meta.sessionId))?.queue).toEqual([expected]);
      });
    });

    // ------------------------------------------------------------ appendMessages

    describe('appendMessages', () => {
      it('appends at the end with seq = index, and replaces the meta when given', async () => {
        const meta = await newSession();
        const { entries: first } = await store.appendMessages(meta.sessionId, [
          message('one'),
          message('two', 'assistant'),
        ]);
        expect(first).toEqual([
          { ...message('one'), seq: 0 },
          { ...message('two', 'assistant'), seq: 1 },
        ]);
        const next = { ...meta, forceRefresh: true };
        const tool = { ...message('result', 'tool'), callId: 'call_1' };
        expect((await store.appendMessages(meta.sessionId, [tool], next)).entries).toEqual([{ ...tool, seq: 2 }]);
        const state = await store.load(meta.sessionId);
        expect(state?.log).toEqual([...first, { ...tool, seq: 2 }]);
        expect(state?.meta).toEqual(next);
      });

      it("a window load reads the log from the meta's fold on; without a fold, or one past the end, the whole log", async () => {
        const meta = await newSession();
        const { entries } = await store.appendMessages(meta.sessionId, [
          message('one'),
          message('two', 'assistant'),
          message('three'),
          message('four', 'assistant'),
        ]);
        const whole = await store.load(meta.sessionId, { window: true });
        expect(whole?.log).toEqual(entries);
        expect(whole?.logStart).toBeUndefined();

        const logFold = { at: 2, toolRows: [], bytes: 64, cursor: { p: { tickets: 7 } } };
        await store.appendMessages(meta.sessionId, [message('five')], { ...meta, logFold });
        const window = await store.load(meta.sessionId, { window: true });
        expect(window?.logStart).toBe(2);
        expect(window?.log.map((e) => e.seq)).toEqual([2, 3, 4]);
        expect(window?.meta.logFold).toEqual(logFold);
        // The rest of the state is the whole read's; only the log is cut.
        const read = await store.load(meta.sessionId);
        expect(read?.log.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4]);
        expect({ ...window, log: read?.log, logStart: undefined }).toEqual({ ...read, logStart: undefined });

        await store.putMeta({ ...meta, logFold: { ...logFold, at: 6 } });
        const past = await store.load(meta.sessionId, { window: true });
        expect(past?.logStart).toBeUndefined();
        expect(past?.log).toHaveLength(5);
        expect(await store.load(`ses_${randomUUID()}`, { window: true })).toBeUndefined();
      });

      it('keeps the meta when none is given', async () => {
        const meta = await newSession();
        await store.appendMessages(meta.sessionId, [message('one')]);
        expect((await store.load(meta.sessionId))?.meta).toEqual(meta);
      });

      it('rejects for an unknown session and creates nothing', async () => {
        const id = `ses_${randomUUID()}`;
        await expect(store.appendMessages(id, [message('x')])).rejects.toThrow();
        expect(await store.load(id)).toBeUndefined();
      });

      it('with an expected version, appends only while the session has it: after another write, conflict and nothing written', async () => {
        const meta = await newSession();
        const read = (await store.load(meta.sessionId))!;
        // Another runner writes between the read and the append.
        const other = await store.appendMessages(meta.sessionId, [message('from the other runner')]);
        const next = { ...meta, forceRefresh: true };
        expect(await store.appendMessages(meta.sessionId, [message('stale')], next, read.version)).toBe('conflict');
        const after = (await store.load(meta.sessionId))!;
        expect(after.log).toEqual(other.entries);
        expect(after.meta).toEqual(meta);
        expect(after.version).toBe(other.written.version);
        // On the version read now: appended, and a new version.
        const appended = await store.appendMessages(meta.sessionId, [message('fresh')], next, after.version);
        expect(appended).toEqual({
          entries: [{ ...message('fresh'), seq: 1 }],
          written: { previous: after.version, version: expect.any(String) },
        });
        const final = (await store.load(meta.sessionId))!;
        expect(final.log.map((e) => (e.type === 'message' ? e.content : ''))).toEqual([
          'from the other runner',
          'fresh',
        ]);
        expect(final.meta).toEqual(next);
        expect(final.version).toBe((appended as { written: Written }).written.version);
      });

      it('writes the call records given with the messages as putCall does; a conflict writes none', async () => {
        const meta = await newSession();
        const gated: CallRecord = { callId: 'call_1', name: 'search', stepIndex: 0, status: 'executed' };
        await store.putCall(meta.sessionId, gated);
        const read = (await store.load(meta.sessionId))!;
        const made: CallRecord = { callId: 'call_2', name: 'fetch', stepIndex: 0, status: 'called', inMessage: true };
        const marked: CallRecord = { ...gated, inMessage: true, resultSeq: 1 };
        const turn = [
          { ...message('', 'assistant'), toolCalls: [{ callId: 'call_1', name: 'search' }] },
          { ...message('found', 'tool'), callId: 'call_1', name: 'search' },
        ];
        const appended = await store.appendMessages(meta.sessionId, turn, undefined, read.version, [made, marked]);
        expect(appended).not.toBe('conflict');
        const after = (await store.load(meta.sessionId))!;
        // The replaced call keeps its place; the new one goes last.
        expect(after.calls).toEqual([marked, made]);
        expect(after.log.map((e) => e.seq)).toEqual([0, 1]);
        expect(after.version).toBe((appended as { written: Written }).written.version);
        const stale = await store.appendMessages(meta.sessionId, [message('late')], undefined, read.version, [
          { ...made, status: 'executed' },
        ]);
        expect(stale).toBe('conflict');
        expect((await store.load(meta.sessionId))?.calls).toEqual([marked, made]);
      });
    });

    // ------------------------------------------------------------ commitStep

    describe('commitStep', () => {
      it('appends the rows in order, drains exactly the given items, records the step and the meta', async () => {
        const meta = await newSession();
        await store.appendMessages(meta.sessionId, [message('hi')]);
        const [a, b, c] = await queued(meta.sessionId, 'a', 'b', 'c');
        const commit = stepCommit(meta, 1, { requestId: 'req_1', delivered: [a!, c!], hookRows: ['hook 1', 'hook 2'] });

        expect(await store.commitStep(meta.sessionId, commit)).toEqual(COMMITTED);
        const state = await store.load(meta.sessionId);
        expect(state?.log.slice(1)).toEqual(commit.rows);
        expect(state?.log.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4]);
        expect(state?.queue).toEqual([b]);
        expect(state?.meta).toEqual(commit.meta);
        expect(state?.requestIds).toEqual(['req_1']);
        expect(await store.getStep(meta.sessionId, { stepId: commit.step.stepId })).toEqual(commit.step);
        expect(await store.getStep(meta.sessionId, { requestId: 'req_1' })).toEqual(commit.step);
        expect(await store.listSteps(meta.sessionId)).toEqual([commit.step]);
      });

      it('a step without rows or a request id is recorded by id', async () => {
        const meta = await newSession();
        const commit = stepCommit(meta, 0);
        expect(await store.commitStep(meta.sessionId, commit)).toEqual(COMMITTED);
        expect(await store.getStep(meta.sessionId, { stepId: commit.step.stepId })).toEqual(commit.step);
        expect((await store.load(meta.sessionId))?.log).toEqual([]);
      });

      it('refuses a changed log length with conflict and writes nothing', async () => {
        const meta = await newSession();
        const [a] = await queued(meta.sessionId, 'a');
        const commit = stepCommit(meta, 0, { requestId: 'req_1', delivered: [a!] });
        await store.appendMessages(meta.sessionId, [message('arrived meanwhile')]);
        const before = await store.load(meta.sessionId);

        expect(await store.commitStep(meta.sessionId, commit)).toEqual({ outcome: 'conflict' });
        expect(await store.load(meta.sessionId)).toEqual(before);
        expect(await store.getStep(meta.sessionId, { stepId: commit.step.stepId })).toBeUndefined();
        expect(await store.getStep(meta.sessionId, { requestId: 'req_1' })).toBeUndefined();
      });

      it('refuses a drained item that is no longer queued with conflict and writes nothing', async () => {
        const meta = await newSession();
        const [a, b] = await queued(meta.sessionId, 'a', 'b');
        const first = stepCommit(meta, 0, { delivered: [a!] });
        expect(await store.commitStep(meta.sessionId, first)).toEqual(COMMITTED);
        const before = await store.load(meta.sessionId);

        // Computed on the new length, but still draining `a`, which the first step delivered.
        const second = stepCommit(before!.meta, 1, { requestId: 'req_2', delivered: [a!, b!] });
        expect(await store.commitStep(meta.sessionId, second)).toEqual({ outcome: 'conflict' });
        expect(await store.load(meta.sessionId)).toEqual(before);
        expect(await store.getStep(meta.sessionId, { requestId: 'req_2' })).toBeUndefined();
        expect(await store.listSteps(meta.sessionId)).toEqual([first.step]);
      });

      it('a known request id gives duplicate with the committed step and writes nothing', async () => {
        const meta = await newSession();
        const first = stepCommit(meta, 0, { requestId: 'req_1', hookRows: ['h'] });
        expect(await store.commitStep(meta.sessionId, first)).toEqual(COMMITTED);
        const before = await store.load(meta.sessionId);

        const again = stepCommit(before!.meta, 1, { requestId: 'req_1', hookRows: ['other'] });
        expect(await store.commitStep(meta.sessionId, again)).toEqual({ outcome: 'duplicate', step: first.step });
        // Even computed on a stale length, a known request id is a duplicate, not a conflict.
        const stale = stepCommit(meta, 0, { requestId: 'req_1' });
        expect(await store.commitStep(meta.sessionId, stale)).toEqual({ outcome: 'duplicate', step: first.step });
        expect(await store.load(meta.sessionId)).toEqual(before);
        expect(await store.getStep(meta.sessionId, { stepId: again.step.stepId })).toBeUndefined();
      });

      it('an unknown session is a conflict and creates nothing', async () => {
        const meta = sessionMeta();
        expect(await store.commitStep(meta.sessionId, stepCommit(meta, 0, { hookRows: ['h'] }))).toEqual({
          outcome: 'conflict',
        });
        expect(await store.load(meta.sessionId)).toBeUndefined();
      });

      it('of concurrent commits on one log length exactly one commits', async () => {
        const meta = await newSession();
        const [a] = await queued(meta.sessionId, 'a');
        const commits = Array.from({ length: 6 }, (_, i) =>
          stepCommit(meta, 0, { requestId: `req_${i}`, delivered: [a!], hookRows: [`h${i}`] }),
        );
        const results = await Promise.all(commits.map((c) => store.commitStep(meta.sessionId, c)));
        expect(results.filter((r) => r.outcome === 'committed')).toHaveLength(1);
        expect(results.filter((r) => r.outcome === 'conflict')).toHaveLength(5);
        const winner = commits[results.findIndex((r) => r.outcome === 'committed')]!;
        const state = await store.load(meta.sessionId);
        expect(state?.log).toEqual(winner.rows);
        expect(state?.queue).toEqual([]);
      });

      it('stored rows are copies of the commit', async () => {
        const meta = await newSession();
        const commit = stepCommit(meta, 0, { hookRows: ['h'] });
        const expected = structuredClone(commit);
        await store.commitStep(meta.sessionId, commit);
        (commit.rows[0] as RowEntry).row.content = 'changed';
        commit.step.rowIds.push('changed');
        commit.meta.steps = 42;
        const state = await store.load(meta.sessionId);
        expect(state?.log).toEqual(expected.rows);
        expect(state?.meta).toEqual(expected.meta);
        const step = await store.getStep(meta.sessionId, { stepId: commit.step.stepId });
        expect(step).toEqual(expected.step);
        step!.rowIds.push('changed again');
        expect(await store.listSteps(meta.sessionId)).toEqual([expected.step]);
      });
    });

    // ------------------------------------------------------------ rewind

    describe('rewind', () => {
      /**
       * A session with two steps: step 1 delivers a and b (b from call_1's tool), step 2
       * delivers c; then d (from call_2) and e are queued; both calls are recorded, each
       * with a call site.
       */
      async function twoSteps() {
        const meta = await newSession();
        await store.appendMessages(meta.sessionId, [message('hi')]);
        await store.putCall(meta.sessionId, { callId: 'call_1', name: 'search', stepIndex: 0, status: 'executed' });
        const a = (await queued(meta.sessionId, 'a'))[0]!;
        const siteB = await store.enqueue(meta.sessionId, [newItem('b', { callId: 'call_1', callStepIndex: 0 })], {
          type: 'site',
          callId: 'call_1',
          site: 'tool:search',
        });
        const b = siteB.outcome === 'recorded' ? siteB.items[0]! : undefined;
        const step1 = stepCommit(meta, 1, { requestId: 'req_1', delivered: [a, b!], ordinal: 1 });
        expect(await store.commitStep(meta.sessionId, step1)).toEqual(COMMITTED);
        const c = (await queued(meta.sessionId, 'c'))[0]!;
        await store.appendMessages(meta.sessionId, [message('thinking', 'assistant')]);
        const step2 = stepCommit(step1.meta, 4, { requestId: 'req_2', delivered: [c], hookRows: ['h'], ordinal: 2 });
        expect(await store.commitStep(meta.sessionId, step2)).toEqual(COMMITTED);
        await store.putCall(meta.sessionId, { callId: 'call_2', name: 'search', stepIndex: 2, status: 'executed' });
        const siteD = await store.enqueue(meta.sessionId, [newItem('d', { callId: 'call_2', callStepIndex: 2 })], {
          type: 'site',
          callId: 'call_2',
          site: 'tool:search',
        });
        const d = siteD.outcome === 'recorded' ? siteD.items[0]! : undefined;
        const e = (await queued(meta.sessionId, 'e'))[0]!;
        const state = await store.load(meta.sessionId);
        expect(state?.log).toHaveLength(6);
        return { meta: step2.meta, a, b: b!, c, d: d!, e, step1, step2, state: state! };
      }

      it("a dropped call takes its tool sites with it, never a hook's (the hook's item stays queued)", async () => {
        const meta = await newSession();
        const id = meta.sessionId;
        await store.enqueue(id, [newItem('tool item')], { type: 'site', callId: 'call_9', site: 'tool:search' });
        const hook = await store.enqueue(id, [newItem('hook item')], {
          type: 'site',
          callId: 'call_9',
          site: 'hook:audit',
        });
        const kept = hook.outcome === 'recorded' ? hook.items[0]! : undefined;
        const state = await store.load(id);
        const toolItem = state!.queue.find((q) => q.itemId !== kept?.itemId)!;
        const ok = await store.rewind(id, {
          expectedLogLength: 0,
          toLength: 0,
          requeue: [],
          dropItems: [toolItem.itemId],
          dropCalls: ['call_9'],
          dropSteps: [],
          meta,
        });
        expect(ok).toBe(true);
        expect((await store.load(id))?.queue).toEqual([kept]);
        expect(
          (await store.enqueue(id, [newItem('hook again')], { type: 'site', callId: 'call_9', site: 'hook:audit' }))
            .outcome,
        ).toBe('replayed');
        expect(
          (await store.enqueue(id, [newItem('tool again')], { type: 'site', callId: 'call_9', site: 'tool:search' }))
            .outcome,
        ).toBe('recorded');
      });

      it('truncates the log, requeues in front in order, drops items, calls, sites and steps', async () => {
        const s = await twoSteps();
        const id = s.meta.sessionId;
        const meta = { ...s.meta, steps: 0, lastRequestEnd: 1 };
        const ok = await store.rewind(id, {
          expectedLogLength: 6,
          toLength: 1,
          requeue: [s.a, s.c],
          dropItems: [s.d.itemId],
          dropCalls: ['call_1', 'call_2'],
          dropSteps: [s.step1.step.stepId, s.step2.step.stepId],
          meta,
        });
        expect(ok).toBe(true);

        const state = await store.load(id);
        expect(state?.log).toEqual(s.state.log.slice(0, 1));
        expect(state?.queue).toEqual([s.a, s.c, s.e]);
        expect(state?.calls).toEqual([]);
        expect(state?.meta).toEqual(meta);
        expect(state?.requestIds).toEqual([]);
        expect(await store.listSteps(id)).toEqual([]);
        expect(await store.getStep(id, { stepId: s.step1.step.stepId })).toBeUndefined();
        expect(await store.getStep(id, { requestId: 'req_2' })).toBeUndefined();

        // The dropped calls' sites record again.
        expect(
          (await store.enqueue(id, [newItem('b again')], { type: 'site', callId: 'call_1', site: 'tool:search' }))
            .outcome,
        ).toBe('recorded');
        // A dropped step's request id is free: a new step with it commits.
        const redo = stepCommit(meta, 1, { requestId: 'req_1', delivered: [s.a], ordinal: 1 });
        expect(await store.commitStep(id, redo)).toEqual(COMMITTED);
        expect(await store.getStep(id, { requestId: 'req_1' })).toEqual(redo.step);
      });

      it('keeps what it is not told to drop', async () => {
        const s = await twoSteps();
        const id = s.meta.sessionId;
        const meta = { ...s.meta, steps: 1 };
        // Rewind to after step 1: step 2's row of c is cut and c requeued; call_2 and d go.
        const ok = await store.rewind(id, {
          expectedLogLength: 6,
          toLength: 3,
          requeue: [s.c],
          dropItems: [s.d.itemId],
          dropCalls: ['call_2'],
          dropSteps: [s.step2.step.stepId],
          meta,
        });
        expect(ok).toBe(true);
        const state = await store.load(id);
        expect(state?.log).toEqual(s.state.log.slice(0, 3));
        expect(state?.queue).toEqual([s.c, s.e]);
        expect(state?.calls).toEqual([{ callId: 'call_1', name: 'search', stepIndex: 0, status: 'executed' }]);
        expect(await store.listSteps(id)).toEqual([s.step1.step]);
        expect(await store.getStep(id, { requestId: 'req_1' })).toEqual(s.step1.step);
        // call_1's site survives: still first-wins.
        expect(
          await store.enqueue(id, [newItem('b again')], { type: 'site', callId: 'call_1', site: 'tool:search' }),
        ).toEqual({ outcome: 'replayed' });
        // Requeued items keep their ids and a new item's id is still new.
        const [f] = await queued(id, 'f');
        expect(new Set([s.a, s.b, s.c, s.d, s.e, f!].map((q) => q.itemId)).size).toBe(6);
      });

      it('a rewind to an empty log', async () => {
        const s = await twoSteps();
        const id = s.meta.sessionId;
        const meta = { ...s.meta, steps: 0, lastRequestEnd: 0 };
        expect(
          await store.rewind(id, {
            expectedLogLength: 6,
            toLength: 0,
            requeue: [],
            dropItems: [],
            dropCalls: [],
            dropSteps: [s.step1.step.stepId, s.step2.step.stepId],
            meta,
          }),
        ).toBe(true);
        const state = await store.load(id);
        expect(state?.log).toEqual([]);
        expect(state?.queue).toEqual([s.d, s.e]);
        expect((await store.appendMessages(id, [message('again')])).entries).toEqual([{ ...message('again'), seq: 0 }]);
      });

      it('refuses a stale expectedLogLength and writes nothing', async () => {
        const s = await twoSteps();
        const id = s.meta.sessionId;
        const before = await store.load(id);
        const steps = await store.listSteps(id);
        expect(
          await store.rewind(id, {
            expectedLogLength: 5,
            toLength: 1,
            requeue: [s.a],
            dropItems: [s.d.itemId],
            dropCalls: ['call_1'],
            dropSteps: [s.step1.step.stepId],
            meta: { ...s.meta, steps: 0 },
          }),
        ).toBe(false);
        expect(await store.load(id)).toEqual(before);
        expect(await store.listSteps(id)).toEqual(steps);
        expect(
          await store.enqueue(id, [newItem('x')], { type: 'site', callId: 'call_1', site: 'tool:search' }),
        ).toEqual({ outcome: 'replayed' });
      });

      it('an unknown session is false and creates nothing', async () => {
        const meta = sessionMeta();
        expect(
          await store.rewind(meta.sessionId, {
            expectedLogLength: 0,
            toLength: 0,
            requeue: [],
            dropItems: [],
            dropCalls: [],
            dropSteps: [],
            meta,
          }),
        ).toBe(false);
        expect(await store.load(meta.sessionId)).toBeUndefined();
      });
    });

    // ------------------------------------------------------------ calls

    describe('putCall', () => {
      it('inserts calls in order; a replaced call keeps its place', async () => {
        const meta = await newSession();
        const one: CallRecord = { callId: 'call_1', name: 'search', stepIndex: 0, status: 'awaiting_approval' };
        const two: CallRecord = {
          callId: 'call_2',
          name: 'fetch',
          stepIndex: 0,
          status: 'awaiting_client',
          deadlineAt: T0,
        };
        await store.putCall(meta.sessionId, one);
        await store.putCall(meta.sessionId, two);
        const approved = { ...one, status: 'executed' as const };
        await store.putCall(meta.sessionId, approved);
        expect((await store.load(meta.sessionId))?.calls).toEqual([approved, two]);
      });

      it('a call of an unknown session records nothing', async () => {
        const id = `ses_${randomUUID()}`;
        await store.putCall(id, { callId: 'call_1', name: 'search', stepIndex: 0, status: 'executed' });
        expect(await store.load(id)).toBeUndefined();
      });

      it('calls are copies', async () => {
        const meta = await newSession();
        const call: CallRecord = { callId: 'call_1', name: 'search', stepIndex: 0, status: 'executed' };
        await store.putCall(meta.sessionId, call);
        call.status = 'denied';
        const state = await store.load(meta.sessionId);
        state!.calls[0]!.name = 'changed';
        expect((await store.load(meta.sessionId))?.calls).toEqual([{ ...call, status: 'executed' }]);
      });
    });

    // ------------------------------------------------------------ steps

    // ------------------------------------------------------------ versions

    describe('versions', () => {
      const versionOf = async (sessionId: string) => (await store.load(sessionId))!.version;

      it('every write gives the session a new version and names the one it replaced', async () => {
        const meta = sessionMeta();
        const id = meta.sessionId;
        const created = await store.createSession(meta, [], [], []);
        expect(await versionOf(id)).toBe(created);
        const seen = [created];
        const wrote = async (written: Written | undefined) => {
          expect(written?.previous).toBe(seen.at(-1));
          expect(await versionOf(id)).toBe(written?.version);
          seen.push(written!.version);
        };

        const enqueued = await store.enqueue(id, [newItem('a'), newItem('b')]);
        await wrote(enqueued.outcome === 'recorded' ? enqueued.written : undefined);
        await wrote((await store.appendMessages(id, [message('hi')])).written);
        await wrote(await store.putCall(id, { callId: 'call_1', name: 'search', stepIndex: 0, status: 'executed' }));
        const [a, b] = (await store.load(id))!.queue;
        const commit = { ...stepCommit(meta, 1, { delivered: [a!, b!] }), expectedVersion: seen.at(-1)! };
        const committed = await store.commitStep(id, commit);
        expect(committed).toEqual({ outcome: 'committed', version: expect.any(String) });
        await wrote({ previous: seen.at(-1)!, version: (committed as { version: string }).version });

        expect(await store.putMeta({ ...commit.meta, forceRefresh: true })).toBe(true);
        const afterMeta = await versionOf(id);
        expect(await store.rewind(id, rewindAll(commit.meta, 3))).toBe(true);
        seen.push(afterMeta, await versionOf(id));
        expect(new Set(seen).size).toBe(seen.length);
      });

      it('a refused write keeps the version', async () => {
        const meta = await newSession();
        const id = meta.sessionId;
        await store.enqueue(id, [newItem('a')], { type: 'key', key: 'k', fingerprint: 'f1' });
        await queued(id, 'b');
        const before = await store.load(id);

        expect(await store.enqueue(id, [newItem('a')], { type: 'key', key: 'k', fingerprint: 'f1' })).toEqual({
          outcome: 'replayed',
        });
        expect(await store.enqueue(id, [newItem('x')], { type: 'key', key: 'k', fingerprint: 'f2' })).toEqual({
          outcome: 'conflict',
        });
        const stale = { ...stepCommit(meta, 0, { delivered: before!.queue }), expectedVersion: 'stale' };
        expect(await store.commitStep(id, stale)).toEqual({ outcome: 'conflict' });
        expect(await store.rewind(id, rewindAll(meta, 5))).toBe(false);
        expect(await store.load(id)).toEqual(before);
      });

      it('a commit naming a replaced version is a conflict and writes nothing, though the log and queue match', async () => {
        const meta = await newSession();
        const id = meta.sessionId;
        const [a] = await queued(id, 'a');
        const read = await store.load(id);
        // A write that changes neither the log nor the queue.
        await store.putCall(id, { callId: 'call_1', name: 'search', stepIndex: 0, status: 'executed' });
        const before = await store.load(id);

        const commit = {
          ...stepCommit(meta, 0, { requestId: 'req_1', delivered: [a!] }),
          expectedVersion: read!.version,
        };
        expect(await store.commitStep(id, commit)).toEqual({ outcome: 'conflict' });
        expect(await store.load(id)).toEqual(before);
        expect(await store.getStep(id, { requestId: 'req_1' })).toBeUndefined();

        const current = { ...commit, expectedVersion: before!.version };
        expect(await store.commitStep(id, current)).toEqual(COMMITTED);
        expect((await store.load(id))?.queue).toEqual([]);
      });

      it('a commit naming the current version drains the queue head, or any queued items, exactly', async () => {
        const meta = await newSession();
        const id = meta.sessionId;
        const [a, b, c] = await queued(id, 'a', 'b', 'c');
        const head = { ...stepCommit(meta, 0, { delivered: [a!, b!] }), expectedVersion: await versionOf(id) };
        expect(await store.commitStep(id, head)).toEqual(COMMITTED);
        let state = await store.load(id);
        expect(state?.queue).toEqual([c]);
        expect(state?.log).toEqual(head.rows);

        const [d] = await queued(id, 'd');
        const notHead = { ...stepCommit(state!.meta, 2, { delivered: [d!] }), expectedVersion: await versionOf(id) };
        expect(await store.commitStep(id, notHead)).toEqual(COMMITTED);
        state = await store.load(id);
        expect(state?.queue).toEqual([c]);
        expect(state?.log).toEqual([...head.rows, ...notHead.rows]);

        // Current version, but an item no longer queued: refused, nothing written.
        const gone = { ...stepCommit(state!.meta, 3, { delivered: [a!] }), expectedVersion: await versionOf(id) };
        expect(await store.commitStep(id, gone)).toEqual({ outcome: 'conflict' });
        expect(await store.load(id)).toEqual(state);
      });
    });

    describe('steps', () => {
      it('getStep and listSteps of an unknown session or step are empty', async () => {
        const meta = await newSession();
        expect(await store.getStep(meta.sessionId, { stepId: 'stp_none' })).toBeUndefined();
        expect(await store.getStep(meta.sessionId, { requestId: 'req_none' })).toBeUndefined();
        expect(await store.getStep(meta.sessionId, {})).toBeUndefined();
        expect(await store.listSteps(`ses_${randomUUID()}`)).toEqual([]);
        expect(await store.getStep(`ses_${randomUUID()}`, { stepId: 'stp_none' })).toBeUndefined();
      });

      it('listSteps orders by ordinal', async () => {
        const meta = await newSession();
        const first = stepCommit(meta, 0, { hookRows: ['1'], ordinal: 1, stepId: 'stp_z' });
        await store.commitStep(meta.sessionId, first);
        const second = stepCommit(first.meta, 1, { hookRows: ['2'], ordinal: 2, stepId: 'stp_a' });
        await store.commitStep(meta.sessionId, second);
        expect(await store.listSteps(meta.sessionId)).toEqual([first.step, second.step]);
      });

      it('getStep by ordinal reads the surviving step of that ordinal, after a rewind the new one', async () => {
        const meta = await newSession();
        const id = meta.sessionId;
        const first = stepCommit(meta, 0, { hookRows: ['1'], ordinal: 1 });
        await store.commitStep(id, first);
        const second = stepCommit(first.meta, 1, { hookRows: ['2'], ordinal: 2, requestId: 'req_2' });
        await store.commitStep(id, second);
        expect(await store.getStep(id, { ordinal: 1 })).toEqual(first.step);
        expect(await store.getStep(id, { ordinal: 2 })).toEqual(second.step);
        expect(await store.getStep(id, { ordinal: 3 })).toBeUndefined();
        expect(await store.getStep(`ses_${randomUUID()}`, { ordinal: 1 })).toBeUndefined();
        // A step id or request id given is the one read, whatever the ordinal.
        expect(await store.getStep(id, { stepId: first.step.stepId, ordinal: 2 })).toEqual(first.step);
        expect(await store.getStep(id, { requestId: 'req_2', ordinal: 1 })).toEqual(second.step);

        // A rewind cuts step 2; the next step takes ordinal 2 again and is the one read.
        const kept = { ...second.meta, steps: 1 };
        const cut = { expectedLogLength: 2, toLength: 1, requeue: [], dropItems: [], dropCalls: [] };
        expect(await store.rewind(id, { ...cut, dropSteps: [second.step.stepId], meta: kept })).toBe(true);
        expect(await store.getStep(id, { ordinal: 2 })).toBeUndefined();
        const again = stepCommit(kept, 1, { hookRows: ['2 again'], ordinal: 2 });
        expect(await store.commitStep(id, again)).toEqual(COMMITTED);
        expect(await store.getStep(id, { ordinal: 2 })).toEqual(again.step);
        expect(await store.getStep(id, { ordinal: 1 })).toEqual(first.step);
        // An ordinal whose digits begin another's is told apart (2 and 21).
        const later = stepCommit(again.meta, 2, { hookRows: ['21'], ordinal: 21 });
        expect(await store.commitStep(id, later)).toEqual(COMMITTED);
        expect(await store.getStep(id, { ordinal: 2 })).toEqual(again.step);
        expect(await store.getStep(id, { ordinal: 21 })).toEqual(later.step);
      });
    });
  });
}
