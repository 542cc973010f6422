/**
 * Reads a whole topic once, from each partition's earliest offset to the end
 * it had when the read began (for operator tools: `npm run dlq`). Uses a
 * throwaway consumer group, deleted afterwards; it commits nothing.
 */
import { randomUUID } from 'node:crypto';
import kafkajs from 'kafkajs';
import type { IncomingRecord } from './bus.ts';
import { busUnavailable } from './kafka-options.ts';

const { Kafka: KafkaClient, logLevel } = kafkajs;

export interface ReadTopicOptions {
  brokers: string[];
  clientId: string;
  /** Gives up after this long, in ms. Default 30,000. */
  timeoutMs?: number;
}

/** Every record of `topic`, by partition then offset; [] for a topic that does not exist. */
export async function readTopic(options: ReadTopicOptions, topic: string): Promise<IncomingRecord[]> {
  const kafka = new KafkaClient({ clientId: options.clientId, brokers: options.brokers, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const groupId = `${options.clientId}-read-${randomUUID()}`;
  let consumer: ReturnType<typeof kafka.consumer> | undefined;
  try {
    if (!(await admin.listTopics()).includes(topic)) return [];
    // The end of each partition now: the read stops there.
    const ends = new Map<number, bigint>();
    for (const p of await admin.fetchTopicOffsets(topic)) {
      if (BigInt(p.high) > BigInt(p.low)) ends.set(p.partition, BigInt(p.high));
    }
    if (ends.size === 0) return [];
    const records: IncomingRecord[] = [];
    const done = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`reading ${topic} took over ${options.timeoutMs ?? 30_000} ms`)),
        options.timeoutMs ?? 30_000,
      );
      consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 200 });
      const c = consumer;
      const started = (async () => {
        await c.connect();
        await c.subscribe({ topic, fromBeginning: true });
        await c.run({
          autoCommit: false,
          eachBatch: async ({ batch }) => {
            const end = ends.get(batch.partition);
            if (end === undefined) return;
            for (const m of batch.messages) {
              if (BigInt(m.offset) >= end) break;
              const headers: Record<string, string> = {};
              for (const [name, value] of Object.entries(m.headers ?? {})) {
                const last = Array.isArray(value) ? value[value.length - 1] : value;
                if (last !== undefined) headers[name] = last.toString();
              }
              records.push({
                topic: batch.topic,
                partition: batch.partition,
                offset: m.offset,
                key: m.key?.toString('utf8') ?? '',
                value: m.value?.toString('utf8') ?? '',
                headers,
              });
              if (BigInt(m.offset) === end - 1n) ends.delete(batch.partition);
            }
            if (ends.size === 0) {
              clearTimeout(timer);
              resolve();
            }
          },
        });
      })();
      started.catch((err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
    await done;
    return records.sort((a, b) => a.partition - b.partition || Number(BigInt(a.offset) - BigInt(b.offset)));
  } catch (err) {
    throw busUnavailable(`reading ${topic} failed`, err);
  } finally {
    await consumer?.disconnect().catch(() => undefined);
    await admin.deleteGroups([groupId]).catch(() => undefined);
    await admin.disconnect();
  }
}
