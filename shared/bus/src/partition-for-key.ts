/**
 * The partition of a key: `(murmur2(utf8(key)) & 0x7fffffff) % partitions`, the
 * formula of Kafka's Java client default partitioner (and of kafkajs'
 * DefaultPartitioner and @platformatic/kafka's compatibilityPartitioner), so
 * the in-memory bus places a key where Kafka does.
 */
export function partitionForKey(key: string, partitions: number): number {
  return (murmur2(Buffer.from(key, 'utf8')) & 0x7fffffff) % partitions;
}

/** Kafka's murmur2 (seed 0x9747b28c), 32-bit signed result. */
export function murmur2(data: Uint8Array): number {
  const m = 0x5bd1e995;
  const length = data.length;
  let h = 0x9747b28c ^ length;
  const whole = length & ~3;
  for (let i = 0; i < whole; i += 4) {
    let k = (data[i] ?? 0) | ((data[i + 1] ?? 0) << 8) | ((data[i + 2] ?? 0) << 16) | ((data[i + 3] ?? 0) << 24);
    k = Math.imul(k, m);
    k ^= k >>> 24;
    k = Math.imul(k, m);
    h = Math.imul(h, m) ^ k;
  }
  const rest = length & 3;
  if (rest === 3) h ^= (data[whole + 2] ?? 0) << 16;
  if (rest >= 2) h ^= (data[whole + 1] ?? 0) << 8;
  if (rest >= 1) {
    h ^= data[whole] ?? 0;
    h = Math.imul(h, m);
  }
  h ^= h >>> 13;
  h = Math.imul(h, m);
  h ^= h >>> 15;
  return h | 0;
}
