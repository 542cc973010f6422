/**
 * Tenants at step-context on Redis (and Redis Cluster): the consumer, fed ticket
 * updates of two tenants, appends each only to the subscribed sessions of its
 * tenant, wildcards included. A record without tenant (written before feeds
 * had tenants) is the single-tenant default's.
 */
import { randomUUID } from 'node:crypto';
import { createMemoryBus } from '@ctxflow/bus';
import { DEFAULT_TENANT, type TicketUpdate, ticketKey } from '@ctxflow/contracts';
import { RedisFeedStreams, StepContextService } from '@ctxflow/step-context';
import { RedisSubscriptionStore } from '@ctxflow/subscriptions';
import { Cluster, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import {
  deleteKeys,
  entriesOf,
  eventually,
  makeUpdate,
  uniquePrefix,
} from '../../services/step-context/test/helpers.ts';
import { requireRedis, requireRedisCluster } from '../support/services.ts';

for (const [name, connect] of [
  ['redis', () => new Redis(requireRedis(), { maxRetriesPerRequest: 2 })],
  ['redis cluster', () => new Cluster(requireRedisCluster(), { redisOptions: { maxRetriesPerRequest: 2 } })],
] as const) {
  describe(`step-context on ${name}: tenant feeds`, () => {
    const redis = connect();
    const prefix = uniquePrefix();
    const services: StepContextService[] = [];
    afterAll(async () => {
      for (const service of services) await service.stop();
      await deleteKeys(redis, prefix);
      await redis.quit();
    });

    it("tenant B's wildcard subscription never sees tenant A's update", async () => {
      const topic = `ticket-updates-${randomUUID()}`;
      const feedStreams = new RedisFeedStreams({ redis, prefix });
      const subscriptions = new RedisSubscriptionStore({ redis, prefix });
      const [ofA, ofB, ofDefault] = ['a', 'b', 'd'].map((t) => `s-${t}-${randomUUID()}`) as [string, string, string];
      await subscriptions.subscribe('ta', ofA, { source: 'generic', ticket: '*' });
      await subscriptions.subscribe('tb', ofB, { source: 'generic', ticket: '*' });
      await subscriptions.subscribe(DEFAULT_TENANT, ofDefault, { source: 'generic', ticket: '*' });
      const bus = createMemoryBus({ retryBackoffMs: 10 });
      const service = new StepContextService({ subscriber: bus.subscriber, feedStreams, subscriptions, topic });
      services.push(service);
      await service.start();

      const ofTa = makeUpdate({ tenant: 'ta', eventId: 'evt-same', summary: 'tenant A confidential' });
      const ofTb = makeUpdate({ tenant: 'tb', eventId: 'evt-same', summary: 'tenant B note' });
      const { tenant: _, ...legacy } = makeUpdate({ summary: 'a record from before tenants' });
      const record = (u: Omit<TicketUpdate, 'tenant'>) => ({ key: ticketKey(u), value: JSON.stringify(u) });
      await bus.publisher.publish(topic, [record(ofTa), record(ofTb), record(legacy)]);

      const summaries = async (sessionId: string) =>
        (await entriesOf({ feedStreams, subscriptions }, sessionId)).map((e) => e.update.summary);
      await eventually(async () => expect(await summaries(ofDefault)).toEqual(['a record from before tenants']));
      expect(await summaries(ofA)).toEqual(['tenant A confidential']);
      expect(await summaries(ofB)).toEqual(['tenant B note']);
      expect((await entriesOf({ feedStreams, subscriptions }, ofA))[0]!.update.tenant).toBe('ta');
    });
  });
}
