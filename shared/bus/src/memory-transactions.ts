/**
 * Transactions on the in-memory bus (the Transactions port of bus.ts): a
 * commit appends all its records in one synchronous turn, so no consumer
 * sees part of one; opening a producer of an id fences the earlier ones of
 * that id (their commits reject), as Kafka's InitProducerId does.
 */
import { CtxflowError } from '@ctxflow/contracts';
import type { IncomingRecord, TransactionalPublisher, Transactions } from './bus.ts';
import type { MemoryBroker } from './memory-broker.ts';

export function memoryTransactions(broker: MemoryBroker): Transactions {
  /** transactional id -> the epoch of its newest producer. */
  const epochs = new Map<string, number>();
  return {
    async open(transactionalId) {
      const epoch = (epochs.get(transactionalId) ?? 0) + 1;
      epochs.set(transactionalId, epoch);
      let closed = false;
      const publisher: TransactionalPublisher = {
        async commit(writes) {
          await Promise.resolve();
          if (closed || epochs.get(transactionalId) !== epoch) {
            throw new CtxflowError('bus_unavailable', `the producer of ${transactionalId} was fenced or closed`);
          }
          for (const { topic, records, partition } of writes) broker.publish(topic, records, partition);
        },
        async lastCommitted(topic, partition, key) {
          const log = broker.topic(topic)[partition];
          if (log === undefined) return undefined;
          for (let i = log.records.length - 1; i >= 0; i--) {
            const record = log.records[i]!;
            if (record.key !== key) continue;
            const found: IncomingRecord = {
              topic,
              partition,
              offset: String(log.base + i),
              key: record.key,
              value: record.value,
              headers: { ...record.headers },
            };
            return found;
          }
          return undefined;
        },
        async close() {
          closed = true;
        },
      };
      return publisher;
    },
  };
}
