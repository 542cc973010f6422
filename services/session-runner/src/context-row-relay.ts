import type { OutgoingRecord, Publisher, TransactionalPublisher, Transactions } from '@ctxflow/bus';
import {
  CONTEXT_ROW_EVENT_TYPE,
  type ContextRowEventData,
  contextRowEventSource,
  isCtxflowError,
  TOPICS,
} from '@ctxflow/contracts';
import { CloudEvent, Kafka } from 'cloudevents';
import type { OutboxEntry, RowOutbox } from './ports/row-outbox.ts';
import { Wakeup } from './wakeup.ts';

/**
 * The relay's progress topic: one partition per outbox shard, compacted, each record
 * (key: the shard's transactional id) naming the outbox entries one transaction published.
 */
export const CONTEXT_ROW_PROGRESS_TOPIC = 'ctxflow.context-rows.progress.v1';

/** The topic configs of CONTEXT_ROW_PROGRESS_TOPIC: compacted, its segments rolled hourly so compaction runs. */
export const CONTEXT_ROW_PROGRESS_CONFIG = { 'cleanup.policy': 'compact', 'segment.ms': '3600000' } as const;

/** Where a relay's attempt failed: taking a shard over, reading, the receipts, publishing, removing. */
export type RelayStage = 'lease' | 'takeover' | 'read' | 'receipts' | 'publish' | 'remove';

/** What the relay reports (adapters/otel-relay-telemetry.ts). */
export interface RelayTelemetry {
  /** One batch of a shard published and removed: `events` events, `entries` outbox entries. */
  published(e: { shard: number; events: number; entries: number }): void;
  /** An attempt failed at `stage` (it is tried again). */
  failed(e: { shard: number; stage: RelayStage }): void;
}

export interface ContextRowRelayDeps {
  outbox: RowOutbox;
  /** Where the rows' events go (CTXFLOW_CONTEXT_ROW_EVENTS); absent: events are off, only `onEntries` runs. */
  publisher?: Publisher;
  /**
   * Kafka transactions (the kafkajs and in-memory buses), with `publisher` only: each batch is published in one
   * transaction with its progress record, exactly once on the topic. Absent: published with
   * `publisher`, at least once.
   */
  transactions?: Transactions;
  /** The transactional ids are `<transactionalIdPrefix>-context-rows-<shard>`; default `ctxflow`. */
  transactionalIdPrefix?: string;
  /**
   * Called with each batch before its events are published and its entries
   * removed (the receipts: delivery index and receipt webhook). A batch cut
   * short is handed again, so it must be idempotent per entry.
   */
  onEntries?: (entries: readonly OutboxEntry[]) => Promise<void>;
  log?: { warn(obj: object, msg: string): void };
  telemetry?: RelayTelemetry;
  /** How often the relay looks for entries nobody woke it for (another process's, a dead relay's), ms; default 1000. */
  pollMs?: number;
  /** Entries published at once at most; default 500. */
  batch?: number;
  /** Wait after a failed read, publish or removal before trying again (ms); default 500. */
  retryMs?: number;
}

export interface ContextRowRelay {
  /** Stops after the batch in flight (published and removed, or left for the next relay), and gives its shards up. */
  close(): Promise<void>;
}

/**
 * The data of a row's event (context-row-event.ts in @ctxflow/contracts).
 */
export function contextRowEventData(entry: OutboxEntry): ContextRowEventData {
  const { row } = entry;
  const data: ContextRowEventData = {
    tenant: entry.tenant,
    sessionId: entry.sessionId,
    stepId: row.stepId,
    rowId: row.row.id,
    seq: row.seq,
    kind: row.row.kind,
    source: row.row.source,
    at: row.at,
  };
  if (row.row.content !== undefined) data.content = row.row.content;
  if (row.row.disable !== undefined) data.disable = row.row.disable;
  if (row.row.enable !== undefined) data.enable = row.row.enable;
  if (row.row.cursor !== undefined) data.cursor = row.row.cursor;
  if (row.row.ticketUpdates !== undefined) data.ticketUpdates = row.row.ticketUpdates;
  if (row.itemId !== undefined) data.itemId = row.itemId;
  return data;
}

/**
 * A row's event in the CloudEvents Kafka binary binding, through the SDK's
 * `Kafka.binary`: the attributes as `ce_*` headers, the data as the value, the
 * session id as the key (the `partitionkey` extension). The event id is the
 * row id: the same row gives the same event, byte for byte, however often it
 * is published.
 */
export function contextRowRecord(entry: OutboxEntry): OutgoingRecord {
  const event = new CloudEvent({
    specversion: '1.0',
    id: entry.row.row.id,
    source: contextRowEventSource(entry.sessionId),
    type: CONTEXT_ROW_EVENT_TYPE,
    subject: entry.sessionId,
    time: new Date(entry.row.at).toISOString(),
    datacontenttype: 'application/json',
    ctxflowtenant: entry.tenant,
    partitionkey: entry.sessionId,
    data: contextRowEventData(entry),
  });
  const message = Kafka.binary(event);
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.headers)) {
    if (value !== undefined) headers[name] = String(value);
  }
  return { key: entry.sessionId, value: JSON.stringify(message.value), headers };
}

/**
 * Relays the row outbox to TOPICS.contextRows, exactly once per row id on the topic (with
 * Kafka transactions), the way Kafka Connect's exactly-once source connectors do.
 *
 * Sessions are spread over the outbox's shards (a hash of the session id). The relay takes
 * each shard it can by a lease in the outbox (Redis), and per shard it holds it opens a
 * transactional producer whose id is the shard's, `<prefix>-context-rows-<shard>`: opening it
 * (InitProducerId) fences the producer of the relay that held the shard before, which can
 * commit nothing more, and ends what it left open. Each batch of a shard (its pending
 * entries) is then published in ONE transaction together with one progress record on
 * CONTEXT_ROW_PROGRESS_TOPIC (the shard's partition, key the transactional id) naming the
 * entries' refs; once committed, the entries are removed from the outbox, and the shard's
 * next batch is read only after that removal. So at most the last committed transaction of
 * a shard can have entries still in the outbox: at takeover, before publishing anything,
 * the relay reads the shard's last committed progress record (read_committed) and removes
 * the refs it names. A transaction that failed, or whose commit's outcome is unknown, makes
 * the relay drop the producer and take the shard over again (fence, read, remove), so a
 * commit that did land is never published twice; one that did not is aborted and its
 * entries published by the next transaction. A consumer reading read_committed sees each
 * committed row's event once.
 *
 * Without transactions (@platformatic/kafka) a batch is published with acks=all and then
 * removed: at least once, a relay killed between the acknowledgement and the removal
 * publishes the batch again (the same `ce_id`); consumers keep the first event per id.
 * On the embedded default the outbox and the bus live in one process and die together.
 *
 * Wakes when this process commits rows, and every `pollMs` for what other processes left.
 * `onEntries` is called with each batch before it is published.
 */
export function startContextRowRelay(deps: ContextRowRelayDeps): ContextRowRelay {
  const pollMs = deps.pollMs ?? 1_000;
  const batch = deps.batch ?? 500;
  const retryMs = deps.retryMs ?? 500;
  const idPrefix = deps.transactionalIdPrefix ?? 'ctxflow';
  const { outbox } = deps;
  /** The shards this relay holds: their producer (once taken over) and a committed batch not yet removed. */
  const held = new Map<number, Held>();
  let closed = false;
  const wakeup = new Wakeup();
  outbox.onAppend(() => wakeup.ring());

  const drop = async (shard: number) => {
    const state = held.get(shard);
    held.delete(shard);
    await state?.producer?.close();
  };

  /** Takes `shard` over: fences its earlier producer, removes what its last committed transaction published. */
  const takeOver = async (shard: number, state: Held, transactions: Transactions, at: { stage: RelayStage }) => {
    at.stage = 'takeover';
    const id = `${idPrefix}-context-rows-${shard}`;
    const producer = await transactions.open(id);
    try {
      const last = await producer.lastCommitted(CONTEXT_ROW_PROGRESS_TOPIC, shard, id);
      at.stage = 'remove';
      if (last !== undefined) await outbox.acknowledge(progressRefs(last.value));
    } catch (err) {
      await producer.close();
      throw err;
    }
    state.producer = producer;
    state.id = id;
  };

  /** One batch of `shard`; returns how many entries it relayed. */
  const relayShard = async (shard: number, at: { stage: RelayStage }): Promise<number> => {
    at.stage = 'lease';
    if (!(await outbox.lease(shard))) {
      await drop(shard);
      return 0;
    }
    let state = held.get(shard);
    if (state === undefined) {
      state = {};
      held.set(shard, state);
    }
    if (state.unremoved !== undefined) {
      at.stage = 'remove';
      await outbox.acknowledge(state.unremoved);
      state.unremoved = undefined;
    }
    if (deps.publisher !== undefined && deps.transactions !== undefined && state.producer === undefined) {
      await takeOver(shard, state, deps.transactions, at);
    }
    at.stage = 'read';
    const entries = await outbox.pending(shard, batch);
    if (entries.length === 0) return 0;
    at.stage = 'receipts';
    await deps.onEntries?.(entries);
    // Only context rows have events; anything else an outbox holds is removed unpublished.
    const records = entries.filter((e) => e.row.type === 'row').map(contextRowRecord);
    at.stage = 'publish';
    const { producer, id } = state;
    if (producer !== undefined && id !== undefined) {
      const progress: OutgoingRecord = { key: id, value: progressValue(entries) };
      try {
        await producer.commit([
          { topic: TOPICS.contextRows, records },
          { topic: CONTEXT_ROW_PROGRESS_TOPIC, partition: shard, records: [progress] },
        ]);
      } catch (err) {
        // Aborted, or its outcome unknown: taken over again (the progress tells) before the next batch.
        state.producer = undefined;
        await producer.close();
        throw err;
      }
    } else if (records.length > 0 && deps.publisher) {
      await deps.publisher.publish(TOPICS.contextRows, records);
    }
    state.unremoved = entries;
    at.stage = 'remove';
    await outbox.acknowledge(entries);
    state.unremoved = undefined;
    deps.telemetry?.published({ shard, events: records.length, entries: entries.length });
    return entries.length;
  };

  const loop = (async () => {
    while (!closed) {
      wakeup.reset();
      let relayed = 0;
      let failed = false;
      for (let shard = 0; shard < outbox.shards && !closed; shard++) {
        const at: { stage: RelayStage } = { stage: 'lease' };
        try {
          relayed += await relayShard(shard, at);
        } catch (err) {
          failed = true;
          deps.telemetry?.failed({ shard, stage: at.stage });
          deps.log?.warn(
            {
              shard,
              stage: at.stage,
              code: isCtxflowError(err) ? err.code : undefined,
              error: (err as Error).message,
            },
            'context row events: relay failed, retrying',
          );
        }
      }
      if (failed) {
        wakeup.reset();
        await wakeup.pause(retryMs);
      } else if (relayed === 0) {
        await wakeup.pause(pollMs);
      }
    }
    for (const shard of [...held.keys()]) {
      await drop(shard);
      await outbox.release(shard).catch(() => undefined);
    }
  })();

  return {
    async close() {
      closed = true;
      wakeup.close();
      await loop;
    },
  };
}

interface Held {
  producer?: TransactionalPublisher;
  /** The producer's transactional id (the progress records' key). */
  id?: string;
  /** A published batch whose removal failed: removed before anything else of the shard. */
  unremoved?: readonly OutboxEntry[];
}

/** A progress record's value: the refs of the entries the transaction published, `[sessionId, ref]` each. */
function progressValue(entries: readonly OutboxEntry[]): string {
  return JSON.stringify({ v: 1, refs: entries.map((e) => [e.sessionId, e.ref]) });
}

function progressRefs(value: string): { sessionId: string; ref: string }[] {
  const parsed = JSON.parse(value) as { refs?: [string, string][] };
  return (parsed.refs ?? []).map(([sessionId, ref]) => ({ sessionId, ref }));
}
