import { randomUUID } from 'node:crypto';
import { createMemoryBus } from '@ctxflow/bus';
import { DEFAULT_TENANT, ticketKey } from '@ctxflow/contracts';
import { type FeedStreams, MemoryFeedStreams, RECORD_ID_HEADER, StepContextService } from '@ctxflow/step-context';
import { MemorySubscriptionStore, type SubscriptionStore } from '@ctxflow/subscriptions';
import { afterEach, describe, expect, it } from 'vitest';
import { entriesOf, eventually, makeUpdate } from '../helpers.ts';

class RecordingLog {
  warnings: { fields: Record<string, unknown>; message: string }[] = [];
  info() {}
  warn(fields: object, message: string) {
    this.warnings.push({ fields: fields as Record<string, unknown>, message });
  }
  error() {}
}

describe('StepContextService', () => {
  const services: StepContextService[] = [];
  afterEach(async () => {
    for (const s of services.splice(0)) await s.stop();
  });

  async function start(deps: {
    feedStreams: FeedStreams;
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

  it('delivers each update to every subscribed session, once; poison records are logged with their offset and skipped', async () => {
    const topic = `ticket-updates-${randomUUID()}`;
    const subscriptions = new MemorySubscriptionStore();
    const feedStreams = new MemoryFeedStreams({ subscriptions });
    await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'github', ticket: 'octo/app#1' });
    await subscriptions.subscribe(DEFAULT_TENANT, 's2', { source: 'github', ticket: '*', scope: 'octo/app' });
    const bus = createMemoryBus({ retryBackoffMs: 10 });
    const log = new RecordingLog();
    const service = new StepContextService({ subscriber: bus.subscriber, feedStreams, subscriptions, log, topic });
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
    await eventually(async () => expect(await feedStreams.resumeFrom(topic, 0)).toBe('5'));
    const stores = { feedStreams, subscriptions };
    expect(await entriesOf(stores, 's1')).toEqual([{ source: 'github', seq: 1, update: u1 }]);
    expect(await entriesOf(stores, 's2')).toEqual([
      { source: 'github', seq: 1, update: u1 },
      { source: 'github', seq: 2, update: u2 },
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
    const subscriptions = new MemorySubscriptionStore();
    const feedStreams = new MemoryFeedStreams({ subscriptions });
    await subscriptions.subscribe(DEFAULT_TENANT, 's', { source: 'generic', ticket: '*' });
    const first = await start({ feedStreams, subscriptions, topic });
    const u = Array.from({ length: 3 }, (_, i) => makeUpdate({ ticket: `G-${i}` }));
    await first.bus.publisher.publish(
      topic,
      u.slice(0, 2).map((x) => ({ key: ticketKey(x), value: JSON.stringify(x) })),
    );
    await eventually(async () => expect(await feedStreams.resumeFrom(topic, 0)).toBe('2'));
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
      feedStreams,
      subscriptions,
      topic,
      groupId: `g-${randomUUID()}`,
    });
    services.push(second);
    await second.start();
    await first.bus.publisher.publish(topic, [{ key: ticketKey(u[2]!), value: JSON.stringify(u[2]) }]);
    await eventually(async () => expect(await feedStreams.resumeFrom(topic, 0)).toBe('3'));
    expect((await entriesOf({ feedStreams, subscriptions }, 's')).map((e) => e.update.ticket)).toEqual([
      'G-0',
      'G-1',
      'G-2',
    ]);
  });

  it('a store failure rejects the batch so the bus delivers it again', async () => {
    const topic = `ticket-updates-${randomUUID()}`;
    const subscriptions = new MemorySubscriptionStore();
    const inner = new MemoryFeedStreams({ subscriptions });
    let failures = 1;
    const flaky: FeedStreams = {
      append: (u) => inner.append(u),
      readSince: (f, a, l) => inner.readSince(f, a, l),
      positionOf: (t, s) => inner.positionOf(t, s),
      recordOffset: (p) => inner.recordOffset(p),
      resumeFrom: (t, p) => inner.resumeFrom(t, p),
      storedPartition: (t: string, p: number) => inner.storedPartition(t, p),
      rebindPartition: (...args: Parameters<FeedStreams['rebindPartition']>) => inner.rebindPartition(...args),
      async applyUpdate(update, position) {
        if (failures-- > 0) throw new Error('store down');
        return inner.applyUpdate(update, position);
      },
      async applyRun(records) {
        if (failures-- > 0) throw new Error('store down');
        return inner.applyRun(records);
      },
    };
    await subscriptions.subscribe(DEFAULT_TENANT, 's', { source: 'generic', ticket: 'T-1' });
    const { bus } = await start({ feedStreams: flaky, subscriptions, topic });
    const u = makeUpdate();
    await bus.publisher.publish(topic, [{ key: ticketKey(u), value: JSON.stringify(u) }]);
    await eventually(async () =>
      expect(await entriesOf({ feedStreams: inner, subscriptions }, 's')).toEqual([
        { source: 'generic', seq: 1, update: u },
      ]),
    );
    expect(failures).toBe(-1);
  });

  it('applies a delivery in runs of maxRecordsPerWrite: one atomic write per run, no look-up of sessions; an overlapping redelivery applies only the rest', async () => {
    const topic = `ticket-updates-${randomUUID()}`;
    const subscriptions = new MemorySubscriptionStore();
    const feedStreams = new MemoryFeedStreams({ subscriptions });
    await subscriptions.subscribe(DEFAULT_TENANT, 's1', { source: 'generic', ticket: 'R-1' });
    await subscriptions.subscribe(DEFAULT_TENANT, 's2', { source: 'generic', ticket: '*' });
    const writes: string[][] = [];
    const counting: FeedStreams = {
      append: (u) => feedStreams.append(u),
      readSince: (f, a, l) => feedStreams.readSince(f, a, l),
      positionOf: (t, s) => feedStreams.positionOf(t, s),
      recordOffset: (p) => feedStreams.recordOffset(p),
      resumeFrom: (t, p) => feedStreams.resumeFrom(t, p),
      storedPartition: (t: string, p: number) => feedStreams.storedPartition(t, p),
      rebindPartition: (...args: Parameters<FeedStreams['rebindPartition']>) => feedStreams.rebindPartition(...args),
      applyUpdate: (u, p, t) => feedStreams.applyUpdate(u, p, t),
      async applyRun(records) {
        writes.push(records.map((r) => r.position.offset));
        return feedStreams.applyRun(records);
      },
    };
    const service = new StepContextService({
      subscriber: createMemoryBus().subscriber,
      feedStreams: counting,
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
    expect(writes).toEqual([['0', '1'], ['2', '3'], ['4']]);
    expect(await feedStreams.resumeFrom(topic, 0)).toBe('5');
    const stores = { feedStreams, subscriptions };
    const ids = async (session: string) => (await entriesOf(stores, session)).map((e) => e.update.id);
    expect(await ids('s1')).toEqual([u[0]!.id, u[2]!.id]);
    expect(await ids('s2')).toEqual(u.map((x) => x.id));

    // Redelivered from offset 3 with one new record: 3 and 4 are skipped by the offset check, 5 is applied.
    const u5 = makeUpdate({ ticket: 'R-1' });
    await service.handle([...delivery.slice(3), incoming(5, JSON.stringify(u5))]);
    expect(await feedStreams.resumeFrom(topic, 0)).toBe('6');
    expect(await ids('s1')).toEqual([u[0]!.id, u[2]!.id, u5.id]);
    expect(await ids('s2')).toEqual([...u.map((x) => x.id), u5.id]);
  });

  it('refuses a maxRecordsPerWrite below 1', () => {
    const deps = {
      subscriber: createMemoryBus().subscriber,
      feedStreams: new MemoryFeedStreams(),
      subscriptions: new MemorySubscriptionStore(),
    };
    expect(() => new StepContextService({ ...deps, maxRecordsPerWrite: 0 })).toThrow(/maxRecordsPerWrite/);
  });

  it('an update no live session follows is stored nowhere; a session subscribed later gets only what comes after', async () => {
    const topic = `ticket-updates-${randomUUID()}`;
    const subscriptions = new MemorySubscriptionStore();
    const feedStreams = new MemoryFeedStreams({ subscriptions });
    await subscriptions.subscribe(DEFAULT_TENANT, 'gone', { source: 'generic', ticket: 'P-1' });
    await subscriptions.eraseSession(DEFAULT_TENANT, 'gone');
    const infos: Record<string, unknown>[] = [];
    const log = { info: (fields: object) => infos.push(fields as Record<string, unknown>), warn() {}, error() {} };
    const service = new StepContextService({ subscriber: createMemoryBus().subscriber, feedStreams, topic, log });
    const record = (offset: number, u: ReturnType<typeof makeUpdate>) => ({
      topic,
      partition: 0,
      offset: String(offset),
      key: ticketKey(u),
      value: JSON.stringify(u),
      headers: {},
    });
    const u1 = makeUpdate({ ticket: 'P-1' });
    await service.handle([record(0, u1)]);
    expect(infos.map((f) => [f.outcome, f.streams])).toEqual([['unwatched', 0]]);
    expect(await feedStreams.positionOf(DEFAULT_TENANT, 'generic')).toBe(0);

    await subscriptions.subscribe(DEFAULT_TENANT, 'kept', { source: 'generic', ticket: 'P-1' });
    const u2 = makeUpdate({ ticket: 'P-1' });
    await service.handle([record(0, u1), record(1, u2)]); // u1 again: a redelivery, skipped by its offset
    expect(infos.map((f) => [f.outcome, f.streams])).toEqual([
      ['unwatched', 0],
      ['appended', 1],
    ]);
    const stores = { feedStreams, subscriptions };
    expect(await entriesOf(stores, 'kept')).toEqual([{ source: 'generic', seq: 1, update: u2 }]);
    expect(await entriesOf(stores, 'gone')).toEqual([]);
  });
});
