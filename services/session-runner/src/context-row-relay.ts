import type { OutgoingRecord, Publisher } from '@ctxflow/bus';
import {
  CONTEXT_ROW_EVENT_TYPE,
  type ContextRowEventData,
  contextRowEventSource,
  isCtxflowError,
  TOPICS,
} from '@ctxflow/contracts';
import { CloudEvent, Kafka } from 'cloudevents';
import type { OutboxEntry, RowOutbox } from './ports/row-outbox.ts';

export interface ContextRowRelayDeps {
  outbox: RowOutbox;
  /** Where the rows' events go (CTXFLOW_CONTEXT_ROW_EVENTS); absent: events are off, only `onEntries` runs. */
  publisher?: Publisher;
  /**
   * Called with each batch before its events are published and its entries
   * removed (the receipts: delivery index and receipt webhook). A batch cut
   * short is handed again, so it must be idempotent per entry.
   */
  onEntries?: (entries: readonly OutboxEntry[]) => Promise<void>;
  log?: { warn(obj: object, msg: string): void };
  /** How often the relay looks for entries nobody woke it for (another process's, a dead relay's), ms; default 1000. */
  pollMs?: number;
  /** Entries published at once at most; default 500. */
  batch?: number;
  /** Wait after a failed read, publish or removal before trying again (ms); default 500. */
  retryMs?: number;
}

export interface ContextRowRelay {
  /** Stops after the batch in flight (published and removed, or left for the next relay). */
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
 * Relays the row outbox to TOPICS.contextRows: reads pending entries, publishes
 * their events, and removes the entries only once the bus acknowledged them
 * (acks=all on Kafka). Wakes when this process commits rows, and every
 * `pollMs` for what other processes left. A crash between the acknowledgement
 * and the removal publishes those events again (the same ids): a consumer
 * keeps the first event per `id`.
 */
export function startContextRowRelay(deps: ContextRowRelayDeps): ContextRowRelay {
  const pollMs = deps.pollMs ?? 1_000;
  const batch = deps.batch ?? 500;
  const retryMs = deps.retryMs ?? 500;
  let closed = false;
  let wake: (() => void) | undefined;
  let woken = false;
  deps.outbox.onAppend(() => {
    woken = true;
    wake?.();
  });
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      if (woken || closed) return resolve();
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = done;
    });

  const loop = (async () => {
    while (!closed) {
      woken = false;
      try {
        const entries = await deps.outbox.pending(batch);
        if (entries.length === 0) {
          await pause(pollMs);
          continue;
        }
        await deps.onEntries?.(entries);
        // Only context rows have events; anything else an outbox holds is removed unpublished.
        const rows = entries.filter((e) => e.row.type === 'row');
        if (rows.length > 0 && deps.publisher)
          await deps.publisher.publish(TOPICS.contextRows, rows.map(contextRowRecord));
        await deps.outbox.acknowledge(entries);
      } catch (err) {
        deps.log?.warn(
          { code: isCtxflowError(err) ? err.code : undefined, error: (err as Error).message },
          'context row events: relay failed, retrying',
        );
        woken = false;
        await pause(retryMs);
      }
    }
  })();

  return {
    async close() {
      closed = true;
      wake?.();
      await loop;
    },
  };
}
