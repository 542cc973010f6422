import { randomUUID } from 'node:crypto';
import { createMemoryBus } from '@ctxflow/bus';
import { DEFAULT_TENANT, ticketKey } from '@ctxflow/contracts';
import {
  type BatchStore,
  MemoryBatchStore,
  MemorySubscriptionStore,
  RECORD_ID_HEADER,
  StepContextService,
  type SubscriptionStore,
} from '@ctxflow/step-context';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, makeUpdate } from '../helpers.ts';

class RecordingLog {
  warnings: { fields: Record<string, unknown>; message: string }[] = [];
  info() {}
  warn(fields: object, message: string) {
    this.warnings.push({ fields: fields as Record<string, unknown>, message });
  }
}

const all = { maxEntries: 10_000, maxBytes: 1e9 };

describe('StepContextService', () => {
  const services: StepContextService[] = [];
  afterEach(async () => {
    for (const s of services.splice(0)) await s.stop();
  });

  async function start(deps: {
    batches: BatchStore;
    subscriptions: SubscriptionStore;
    topic: string;
    groupId?: string;
  }) {
    const bus = createMemoryBus({ retryBackoffMs: 10 });
    const log = new RecordingLog();
    const service = new StepContextService({ subscriber: bus.subscriber, log, ...deps });
    services.push(service);
    await service.start();
    return { bus, log, service };
  }

  it('appends each update to every subscribed session, once; poison records are logged with their offset and skipped', async () => {
    const topic = `ticket-updates-${randomUUID()}`;
    const batches = new MemoryBatchStore();
    const subscriptions = new MemorySubscriptionStore();
    await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'github', ticket: 'octo/app#1' });
    await subscriptions.subscribe(DEFAULT_TENANT, 's2', { source: 'github', ticket: '*', scope: 'octo/app' });
    const bus = createMemoryBus({ retryBackoffMs: 10 });
    const log = new RecordingLog();
    const service = new StepContextService({ subscriber: bus.subscriber, batches, subscriptions, log, topic });
    services.push(service);
    await service.start();

    const u1 = makeUpdate({ source: 'github', ticket: 'octo/app#1', scope: 'octo/app' });
    const u2 = makeUpdate({ source: 'github', ticket: 'octo/app#2', scope: 'octo/app' });
    const record = (u: typeof u1) => ({
      key: ticketKey(u),
      value: JSON.stringify(u),
      headers: { [RECORD_ID_HEADER]: u.id },
    });
    await bus.publisher.publish(topic, [
      record(u1),
      { key: 'github:octo/app#1', value: '{not json' },
      {
        key: 'github:octo/app#1',
        value: JSON.stringify({ ...u1, id: undefined }),
        headers: { [RECORD_ID_HEADER]: 'x' },
      },
      record(u1), // the same update published twice
      record(u2),
    ]);
    await eventually(async () => expect(await batches.resumeFrom(topic, 0)).toBe('5'));
    expect(await batches.readSince('s1', 0, all)).toEqual([{ cursor: 1, update: u1 }]);
    expect(await batches.readSince('s2', 0, all)).toEqual([
      { cursor: 1, update: u1 },
      { cursor: 2, update: u2 },
    ]);
    expect(log.warnings).toEqual([
      {
        message: 'ticket update skipped: not JSON',
        fields: expect.objectContaining({ topic, partition: 0, offset: '1', key: 'github:octo/app#1' }),
      },
      {
        message: 'ticket update skipped: not a valid TicketUpdate',
        fields: expect.objectContaining({
          topic,
          partition: 0,
          offset: '2',
          recordId: 'x',
          issues: [expect.stringMatching(/^id: /)],
        }),
      },
    ]);
  });

  it('resumes from the offset stored with the entries: a restarted consumer applies nothing twice', async () => {
    const topic = `ticket-updates-${randomUUID()}`;
    const batches = new MemoryBatchStore();
    const subscriptions = new MemorySubscriptionStore();
    await subscriptions.subscribe(DEFAULT_TENANT, 's', { source: 'generic', ticket: '*' });
    const first = await start({ batches, subscriptions, topic });
    const u = Array.from({ length: 3 }, (_, i) => makeUpdate({ ticket: `G-${i}` }));
    await first.bus.publisher.publish(
      topic,
      u.slice(0, 2).map((x) => ({ key: ticketKey(x), value: JSON.stringify(x) })),
    );
    await eventually(async () => expect(await batches.resumeFrom(topic, 0)).toBe('2'));
    await first.service.stop();

    // Replaying the same records (a redelivery after a crash) is refused by the stored offset.
    await first.service.handle(
      u.slice(0, 2).map((x, i) => ({
        topic,
        partition: 0,
        offset: String(i),
        key: ticketKey(x),
        value: JSON.stringify(x),
        headers: {},
      })),
    );
    // A new consumer of a fresh group on the same bus reads from the topic's start, resumeFrom skips what was applied.
    const second = new StepContextService({
      subscriber: first.bus.subscriber,
      batches,
      subscriptions,
      topic,
      groupId: `g-${randomUUID()}`,
    });
    services.push(second);
    await second.start();
    await first.bus.publisher.publish(topic, [{ key: ticketKey(u[2]!), value: JSON.stringify(u[2]) }]);
    await eventually(async () => expect(await batches.resumeFrom(topic, 0)).toBe('3'));
    expect((await batches.readSince('s', 0, all)).map((e) => e.update.ticket)).toEqual(['G-0', 'G-1', 'G-2']);
  });

  it('a store failure rejects the batch so the bus delivers it again', async () => {
    const topic = `ticket-updates-${randomUUID()}`;
    const inner = new MemoryBatchStore();
    let failures = 1;
    const flaky: BatchStore = {
      append: (s, u) => inner.append(s, u),
      readSince: (s, a, l) => inner.readSince(s, a, l),
      copy: (f, t) => inner.copy(f, t),
      erase: (s) => inner.erase(s),
      touch: (s) => inner.touch(s),
      recordOffset: (p) => inner.recordOffset(p),
      resumeFrom: (t, p) => inner.resumeFrom(t, p),
      async applyUpdate(update, sessions, position) {
        if (failures-- > 0) throw new Error('store down');
        return inner.applyUpdate(update, sessions, position);
      },
      async applyBatch(records) {
        if (failures-- > 0) throw new Error('store down');
        return inner.applyBatch(records);
      },
    };
    const subscriptions = new MemorySubscriptionStore();
    await subscriptions.subscribe(DEFAULT_TENANT, 's', { source: 'generic', ticket: 'T-1' });
    const { bus } = await start({ batches: flaky, subscriptions, topic });
    const u = makeUpdate();
    await bus.publisher.publish(topic, [{ key: ticketKey(u), value: JSON.stringify(u) }]);
    await eventually(async () => expect(await inner.readSince('s', 0, all)).toEqual([{ cursor: 1, update: u }]));
    expect(failures).toBe(-1);
  });

  it('applies a delivery in runs of maxRecordsPerWrite: one look-up and one atomic write per run; an overlapping redelivery applies only the rest', async () => {
    const topic = `ticket-updates-${randomUUID()}`;
    const batches = new MemoryBatchStore();
    const inner = new MemorySubscriptionStore();
    await inner.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'R-1' });
    await inner.subscribe(DEFAULT_TENANT, 's2', { source: 'generic', ticket: '*' });
    const calls = { lookups: [] as number[], writes: [] as string[][] };
    const subscriptions: SubscriptionStore = {
      subscribe: (t, s, sub) => inner.subscribe(t, s, sub),
      unsubscribe: (t, s, sub) => inner.unsubscribe(t, s, sub),
      eraseSession: (t, s) => inner.eraseSession(t, s),
      prune: (u, s) => inner.prune(u, s),
      list: (s) => inner.list(s),
      sessionsFor: (u) => inner.sessionsFor(u),
      async sessionsForMany(updates) {
        calls.lookups.push(updates.length);
        return inner.sessionsForMany(updates);
      },
    };
    const counting: BatchStore = {
      append: (s, u) => batches.append(s, u),
      readSince: (s, a, l) => batches.readSince(s, a, l),
      copy: (f, t) => batches.copy(f, t),
      erase: (s) => batches.erase(s),
      touch: (s) => batches.touch(s),
      recordOffset: (p) => batches.recordOffset(p),
      resumeFrom: (t, p) => batches.resumeFrom(t, p),
      applyUpdate: (u, s, p, t) => batches.applyUpdate(u, s, p, t),
      async applyBatch(records) {
        calls.writes.push(records.map((r) => r.position.offset));
        return batches.applyBatch(records);
      },
    };
    const service = new StepContextService({
      subscriber: createMemoryBus().subscriber,
      batches: counting,
      subscriptions,
      topic,
      maxRecordsPerWrite: 2,
    });
    const u = Array.from({ length: 4 }, (_, i) => makeUpdate({ ticket: i % 2 === 0 ? 'R-1' : 'R-2' }));
    const incoming = (offset: number, value: string) => ({
      topic,
      partition: 0,
      offset: String(offset),
      key: 'generic:R',
      value,
      headers: {},
    });
    const delivery = [
      incoming(0, JSON.stringify(u[0])),
      incoming(1, JSON.stringify(u[1])),
      incoming(2, '{poison'),
      incoming(3, JSON.stringify(u[2])),
      incoming(4, JSON.stringify(u[3])),
    ];
    await service.handle(delivery);
    expect(calls.writes).toEqual([['0', '1'], ['2', '3'], ['4']]);
    expect(calls.lookups).toEqual([2, 1, 1]); // the poison record needs no look-up
    expect(await batches.resumeFrom(topic, 0)).toBe('5');
    expect((await batches.readSince('s1', 0, all)).map((e) => e.update.id)).toEqual([u[0]!.id, u[2]!.id]);
    expect((await batches.readSince('s2', 0, all)).map((e) => e.update.id)).toEqual(u.map((x) => x.id));

    // Redelivered from offset 3 with one new record: 3 and 4 are skipped by the offset check, 5 is applied.
    const u5 = makeUpdate({ ticket: 'R-1' });
    await service.handle([...delivery.slice(3), incoming(5, JSON.stringify(u5))]);
    expect(await batches.resumeFrom(topic, 0)).toBe('6');
    expect((await batches.readSince('s1', 0, all)).map((e) => e.update.id)).toEqual([u[0]!.id, u[2]!.id, u5.id]);
    expect((await batches.readSince('s2', 0, all)).map((e) => e.update.id)).toEqual([...u.map((x) => x.id), u5.id]);
  });

  it('refuses a maxRecordsPerWrite below 1', () => {
    const deps = {
      subscriber: createMemoryBus().subscriber,
      batches: new MemoryBatchStore(),
      subscriptions: new MemorySubscriptionStore(),
    };
    expect(() => new StepContextService({ ...deps, maxRecordsPerWrite: 0 })).toThrow(/maxRecordsPerWrite/);
  });

  it('a session the store refused as unsubscribed (erased after the look-up) is pruned from the index', async () => {
    const topic = `ticket-updates-${randomUUID()}`;
    const inner = new MemorySubscriptionStore();
    await inner.subscribe(DEFAULT_TENANT, 'kept', { source: 'generic', ticket: 'P-1' });
    await inner.subscribe(DEFAULT_TENANT, 'gone', { source: 'generic', ticket: 'P-1' });
    const batches = new MemoryBatchStore({ subscribed: (id) => inner.holds(id) });
    const pruned: [string, string[]][] = [];
    const subscriptions: SubscriptionStore = {
      subscribe: (t, s, sub) => inner.subscribe(t, s, sub),
      unsubscribe: (t, s, sub) => inner.unsubscribe(t, s, sub),
      eraseSession: (t, s) => inner.eraseSession(t, s),
      list: (s) => inner.list(s),
      sessionsFor: (u) => inner.sessionsFor(u),
      async sessionsForMany(updates) {
        const lists = await inner.sessionsForMany(updates);
        await inner.eraseSession(DEFAULT_TENANT, 'gone'); // erased between the look-up and the apply
        return lists;
      },
      async prune(update, ids) {
        pruned.push([update.ticket, [...ids]]);
        await inner.prune(update, ids);
      },
    };
    const { bus } = await start({ batches, subscriptions, topic });
    const u = makeUpdate({ ticket: 'P-1' });
    await bus.publisher.publish(topic, [
      { key: ticketKey(u), value: JSON.stringify(u), headers: { [RECORD_ID_HEADER]: u.id } },
    ]);
    await eventually(async () => expect(await batches.resumeFrom(topic, 0)).toBe('1'));
    expect(await batches.readSince('gone', 0, all)).toEqual([]);
    expect(await batches.readSince('kept', 0, all)).toEqual([{ cursor: 1, update: u }]);
    expect(pruned).toEqual([['P-1', ['gone']]]);
    expect(await inner.sessionsFor({ source: 'generic', ticket: 'P-1' })).toEqual(['kept']);
  });
});
