/**
 * The feed-ingestor's delivery ledger on a Redis Cluster: with
 * REDIS_CLUSTER_NODES (and no REDIS_URL), two feed-ingestor processes share
 * one ledger on the Cluster, so a delivery sent to one and then to the other
 * is published once and answered as a duplicate the second time, and its
 * ledger key is on the Cluster, confirmed.
 */
import { randomUUID } from 'node:crypto';
import { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { genericBody, postSigned } from '../faults/feed-load.ts';
import { cleanupsAfterAll } from '../faults/load-rig.ts';
import { feedIngestor } from '../faults/processes.ts';
import { requireKafka, requireRedisCluster } from '../support/services.ts';

const SECRET = 'feed-ledger-cluster-secret';

/** Every key under `pattern` on every master of the Cluster, with its value. */
async function keysOnCluster(cluster: Cluster, pattern: string): Promise<Map<string, string | null>> {
  const found = new Map<string, string | null>();
  for (const node of cluster.nodes('master')) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) found.set(key, await node.get(key));
    } while (cursor !== '0');
  }
  return found;
}

describe('feed-ingestor: the delivery ledger on a Redis Cluster', () => {
  const cleanups = cleanupsAfterAll();

  it('two feed-ingestors on REDIS_CLUSTER_NODES share the ledger: the second copy of a delivery is a duplicate', async () => {
    const run = `flc-${randomUUID().slice(0, 8)}`;
    const prefix = `test:${run}`;
    const nodes = requireRedisCluster();
    const cluster = new Cluster(nodes);
    cleanups.push(async () => {
      for (const key of (await keysOnCluster(cluster, `${prefix}:*`)).keys()) await cluster.unlink(key);
      cluster.disconnect();
    });
    const common = {
      KAFKA_BROKERS: requireKafka().join(','),
      REDIS_CLUSTER_NODES: nodes.map((n) => `${n.host}:${n.port}`).join(','),
      CTXFLOW_REDIS_PREFIX: prefix,
      CTXFLOW_LOG_LEVEL: 'error',
    };
    const [a, b] = [await feedIngestor({ common, secret: SECRET }), await feedIngestor({ common, secret: SECRET })];
    cleanups.push(() => Promise.all([a.feed.stop(), b.feed.stop()]));
    await Promise.all([a.feed.start(), b.feed.start()]);

    const body = genericBody(`${run}-e1`, `${run}-t1`);
    const first = await postSigned(a.feedUrl, SECRET, body);
    const second = await postSigned(b.feedUrl, SECRET, body);

    expect(first).toMatchObject({ status: 202, body: { accepted: true, id: `generic:${run}-e1` } });
    expect(first.body.duplicate).toBeUndefined();
    expect(second).toMatchObject({ status: 202, body: { accepted: true, id: `generic:${run}-e1`, duplicate: true } });
    expect([...(await keysOnCluster(cluster, `${prefix}:feed:delivery:*`)).values()]).toEqual(['done']);
  }, 120_000);
});
