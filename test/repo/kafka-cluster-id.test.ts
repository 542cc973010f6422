/**
 * The Kafka cluster ids scripts/infra.ts formats brokers with: 16 random bytes in
 * URL-safe base64, never starting with `-` (kafka-storage would read the id as an
 * option and refuse to format: about one draw in 64 did before).
 */
import { describe, expect, it } from 'vitest';
import { newKafkaClusterId } from '../../scripts/infra.ts';

describe('newKafkaClusterId', () => {
  it('is 22 URL-safe base64 characters (16 bytes) and never starts with a dash', () => {
    const ids = Array.from({ length: 5_000 }, () => newKafkaClusterId());
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_][A-Za-z0-9_-]{21}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
