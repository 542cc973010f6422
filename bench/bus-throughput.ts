/**
 * Rough throughput of the bus adapters: publish N records of 1 KiB (in
 * publish calls of BATCH records, each awaited: acks=all), then consume them
 * with a fresh group and a no-op handler. Not a test; run by hand:
 *
 *   KAFKA_BROKERS=127.0.0.1:19092 node bench/bus-throughput.ts [records] [batch]
 */
import { randomUUID } from 'node:crypto';
import type { Bus, KafkaClientName } from '@ctxflow/bus';
import { createBus } from '@ctxflow/bus';

const RECORDS = Number(process.argv[2] ?? 10_000);
const BATCH = Number(process.argv[3] ?? 500);
const PARTITIONS = 3;
const VALUE = 'x'.repeat(1024);

async function measure(name: string, bus: Bus): Promise<void> {
  const topic = `ctxflow-bench.${name}.${randomUUID().slice(0, 8)}`;
  await bus.admin.ensureTopics([{ name: topic, partitions: PARTITIONS }]);
  const records = Array.from({ length: RECORDS }, (_, i) => ({
    key: `key-${i % 100}`,
    value: VALUE,
    headers: { 'x-record-id': String(i) },
  }));

  const publishStart = performance.now();
  for (let i = 0; i < records.length; i += BATCH) await bus.publisher.publish(topic, records.slice(i, i + BATCH));
  const publishMs = performance.now() - publishStart;

  let handled = 0;
  let done!: () => void;
  const all = new Promise<void>((resolve) => {
    done = resolve;
  });
  const consumeStart = performance.now();
  const subscription = await bus.subscriber.subscribe({
    topic,
    groupId: `${topic}.group`,
    handle: async (batch) => {
      handled += batch.length;
      if (handled >= RECORDS) done();
    },
  });
  await all;
  const consumeMs = performance.now() - consumeStart;
  await subscription.close();
  await Promise.all([bus.publisher.close(), bus.admin.close()]);

  const rate = (ms: number) => Math.round(RECORDS / (ms / 1000));
  console.log(
    `${name.padEnd(13)} publish ${publishMs.toFixed(0).padStart(6)} ms (${rate(publishMs)} rec/s)   ` +
      `consume ${consumeMs.toFixed(0).padStart(6)} ms (${rate(consumeMs)} rec/s, includes group join)`,
  );
}

const brokers = process.env.KAFKA_BROKERS?.split(',');
console.log(`${RECORDS} records of 1 KiB, publish calls of ${BATCH}, ${PARTITIONS} partitions`);
await measure('memory', createBus({ client: 'kafkajs', clientId: 'bench' }));
if (brokers === undefined) throw new Error('KAFKA_BROKERS is not set');
for (const client of ['kafkajs', 'platformatic'] satisfies KafkaClientName[]) {
  await measure(client, createBus({ brokers, client, clientId: `bench-${client}`, heartbeatIntervalMs: 1000 }));
}
