import { randomUUID } from 'node:crypto';
import { type DeliveryLedger, MemoryDeliveryLedger, RedisDeliveryLedger } from '@ctxflow/feeds';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ledgerKeys } from '../../shared/feeds/src/adapters/redis/keys.ts';
import { feedApp, fixture, genericHeaders } from '../../shared/feeds/test/helpers.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The ledger contract: one suite, run against every adapter. */
function ledgerContract(name: string, make: () => DeliveryLedger) {
  describe(`DeliveryLedger contract: ${name}`, () => {
    it('a new id is claimed; a second claim while leased is in_flight', async () => {
      const ledger = make();
      const id = `generic:${randomUUID()}`;
      expect(await ledger.claim(id, 10_000)).toBe('claimed');
      expect(await ledger.claim(id, 10_000)).toBe('in_flight');
    });

    it('release frees an unconfirmed lease: the retry claims it', async () => {
      const ledger = make();
      const id = `generic:${randomUUID()}`;
      await ledger.claim(id, 10_000);
      await ledger.release(id);
      expect(await ledger.claim(id, 10_000)).toBe('claimed');
    });

    it('a confirmed id is done, and release does not undo it', async () => {
      const ledger = make();
      const id = `github:${randomUUID()}`;
      await ledger.claim(id, 10_000);
      await ledger.confirm(id, 60_000);
      expect(await ledger.claim(id, 10_000)).toBe('done');
      await ledger.release(id);
      expect(await ledger.claim(id, 10_000)).toBe('done');
    });

    it('a lease that ends unconfirmed frees the id (a crashed request)', async () => {
      const ledger = make();
      const id = `jira:${randomUUID()}`;
      await ledger.claim(id, 50);
      await sleep(120);
      expect(await ledger.claim(id, 10_000)).toBe('claimed');
    });

    it('a confirmation ends after its retention', async () => {
      const ledger = make();
      const id = `zendesk:${randomUUID()}`;
      await ledger.claim(id, 10_000);
      await ledger.confirm(id, 50);
      await sleep(120);
      expect(await ledger.claim(id, 10_000)).toBe('claimed');
    });

    it('state reads an id without claiming it: undefined, in_flight while leased, done once confirmed', async () => {
      const ledger = make();
      const id = `acme:generic:${randomUUID()}`;
      expect(await ledger.state(id)).toBeUndefined();
      expect(await ledger.claim(id, 10_000)).toBe('claimed');
      expect(await ledger.state(id)).toBe('in_flight');
      await ledger.confirm(id, 60_000);
      expect(await ledger.state(id)).toBe('done');
      expect(await ledger.state(`${id}-other`)).toBeUndefined();
    });

    it('state is undefined once a lease is released or a confirmation ended', async () => {
      const ledger = make();
      const released = `acme:generic:${randomUUID()}`;
      await ledger.claim(released, 10_000);
      await ledger.release(released);
      expect(await ledger.state(released)).toBeUndefined();
      const ended = `acme:generic:${randomUUID()}`;
      await ledger.claim(ended, 10_000);
      await ledger.confirm(ended, 50);
      await sleep(120);
      expect(await ledger.state(ended)).toBeUndefined();
    });

    it('ids are independent', async () => {
      const ledger = make();
      const a = `generic:${randomUUID()}`;
      const b = `generic:${randomUUID()}`;
      await ledger.claim(a, 10_000);
      await ledger.confirm(a, 60_000);
      expect(await ledger.claim(b, 10_000)).toBe('claimed');
    });
  });
}

ledgerContract('memory', () => new MemoryDeliveryLedger());

const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
const prefix = `test-feed-ledger-${randomUUID()}`;

afterAll(async () => {
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length) await redis.del(...keys);
  await redis.quit();
});

ledgerContract('redis', () => new RedisDeliveryLedger({ redis, prefix }));

describe('RedisDeliveryLedger on real Redis', () => {
  beforeAll(async () => {
    expect(await redis.ping()).toBe('PONG');
  });

  it('writes one key per delivery under the configured prefix: pending with the lease, done with the retention', async () => {
    const ledger = new RedisDeliveryLedger({ redis, prefix });
    const id = `generic:${randomUUID()}`;
    const key = ledgerKeys(prefix).delivery(id);
    expect(key).toBe(`${prefix}:feed:delivery:${id}`);
    await ledger.claim(id, 30_000);
    expect(await redis.get(key)).toBe('pending');
    expect(await redis.pttl(key)).toBeGreaterThan(25_000);
    await ledger.confirm(id, 3_600_000);
    expect(await redis.get(key)).toBe('done');
    expect(await redis.pttl(key)).toBeGreaterThan(3_500_000);
  });

  it('two ledgers on one Redis (two replicas) see each other: a delivery is published once', async () => {
    const replicaA = await feedApp({ ledger: new RedisDeliveryLedger({ redis, prefix }) });
    const replicaB = await feedApp({ ledger: new RedisDeliveryLedger({ redis, prefix }) });
    const body = JSON.stringify({ eventId: `evt-${randomUUID()}`, ticket: 'OPS-7', summary: 'status changed' });
    const request = { method: 'POST' as const, url: '/feeds/generic', headers: genericHeaders(body), payload: body };
    const first = await replicaA.app.inject(request);
    const second = await replicaB.app.inject(request);
    expect([first.statusCode, second.statusCode]).toEqual([202, 202]);
    expect(second.json().duplicate).toBe(true);
    expect(replicaA.publisher.published.length + replicaB.publisher.published.length).toBe(1);
    await replicaA.app.close();
    await replicaB.app.close();
  });

  it('a failed publish releases the lease in Redis: the retry publishes once', async () => {
    const { app, publisher } = await feedApp({ ledger: new RedisDeliveryLedger({ redis, prefix }) });
    const body = fixture('generic-update.json').toString('utf8').replace('evt-2024-05-01-0001', `evt-${randomUUID()}`);
    const request = { method: 'POST' as const, url: '/feeds/generic', headers: genericHeaders(body), payload: body };
    publisher.failing = true;
    expect((await app.inject(request)).statusCode).toBe(503);
    publisher.failing = false;
    expect((await app.inject(request)).statusCode).toBe(202);
    expect((await app.inject(request)).statusCode).toBe(202);
    expect(publisher.published).toHaveLength(1);
    await app.close();
  });

  it('Redis unreachable -> the ledger refuses with store_unavailable', async () => {
    const dead = new Redis({
      host: '127.0.0.1',
      port: 1,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
    });
    const ledger = new RedisDeliveryLedger({ redis: dead, prefix });
    await expect(ledger.claim('generic:x', 1000)).rejects.toMatchObject({ code: 'store_unavailable', status: 503 });
    dead.disconnect();
  });
});
