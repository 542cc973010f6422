/**
 * The in-memory bus places a key on the partition Kafka's Java client picks:
 * `toPositive(murmur2(key)) % partitions`. The hashes are the Java client's own test
 * vectors (org.apache.kafka.common.utils.UtilsTest.testMurmur2); the contract test
 * (test/contract/bus.contract.ts) checks the same placement on a broker.
 */
import { describe, expect, it } from 'vitest';
import { partitionForKey } from '../src/partition-for-key.ts';

const JAVA_MURMUR2: [string, number][] = [
  ['21', -973932308],
  ['foobar', -790332482],
  ['a-little-bit-long-string', -985981536],
  ['a-little-bit-longer-string', -1486304829],
  ['lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8', -58897971],
  ['abc', 479470107],
];

describe('partitionForKey', () => {
  it.each(JAVA_MURMUR2)('%s lands where the Java client puts it, for 1 to 64 partitions', (key, hash) => {
    for (let partitions = 1; partitions <= 64; partitions++) {
      expect(partitionForKey(key, partitions)).toBe((hash & 0x7fffffff) % partitions);
    }
  });
});
