import {
  MemoryBatchStore,
  MemorySubscriptionStore,
  RedisBatchStore,
  RedisSubscriptionStore,
} from '@ctxflow/step-context';
import { Cluster, Redis } from 'ioredis';
import { deleteKeys, uniquePrefix } from '../step-context/helpers.ts';
import { requireRedis, requireRedisCluster } from '../support/services.ts';
import { batchStoreContract } from './batch-store.contract.ts';
import { subscriptionStoreContract } from './subscription-store.contract.ts';

function onRedis() {
  const redis = new Redis(requireRedis(), { maxRetriesPerRequest: 2 });
  const prefix = uniquePrefix();
  return {
    redis,
    prefix,
    async cleanup() {
      await deleteKeys(redis, prefix);
      await redis.quit();
    },
  };
}

function onCluster() {
  const redis = new Cluster(requireRedisCluster(), { redisOptions: { maxRetriesPerRequest: 2 } });
  const prefix = uniquePrefix();
  return {
    redis,
    prefix,
    async cleanup() {
      await deleteKeys(redis, prefix);
      await redis.quit();
    },
  };
}

batchStoreContract({
  name: 'memory',
  create: async () => ({ store: new MemoryBatchStore(), cleanup: async () => {} }),
});

batchStoreContract({
  name: 'redis',
  create: async () => {
    const { redis, prefix, cleanup } = onRedis();
    return { store: new RedisBatchStore({ redis, prefix }), cleanup };
  },
});

batchStoreContract({
  name: 'redis cluster (one script per session)',
  create: async () => {
    const { redis, prefix, cleanup } = onCluster();
    return { store: new RedisBatchStore({ redis, prefix }), cleanup };
  },
});

subscriptionStoreContract({
  name: 'memory',
  create: async () => ({ store: new MemorySubscriptionStore(), cleanup: async () => {} }),
});

subscriptionStoreContract({
  name: 'redis',
  create: async () => {
    const { redis, prefix, cleanup } = onRedis();
    return { store: new RedisSubscriptionStore({ redis, prefix }), cleanup };
  },
});

subscriptionStoreContract({
  name: 'redis cluster',
  create: async () => {
    const { redis, prefix, cleanup } = onCluster();
    return { store: new RedisSubscriptionStore({ redis, prefix }), cleanup };
  },
});
