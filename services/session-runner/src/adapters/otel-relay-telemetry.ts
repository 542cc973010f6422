import {
  ATTR_OUTBOX_SHARD,
  ATTR_RELAY_STAGE,
  lazy,
  METRIC_ROW_EVENT_BATCHES,
  METRIC_ROW_EVENT_FAILURES,
  METRIC_ROW_EVENTS_PUBLISHED,
  meterOf,
  type TelemetryHandles,
} from '@ctxflow/telemetry';
import type { RelayTelemetry } from '../context-row-relay.ts';

/**
 * The row relay's telemetry on OpenTelemetry (context-row-relay.ts): events
 * published and batches, by outbox shard; failed attempts by shard and stage.
 * The relay's own warn log says what failed.
 */
export function createRelayTelemetry(handles: TelemetryHandles = {}): RelayTelemetry {
  const meter = meterOf(handles);
  const instruments = lazy(() => {
    const m = meter();
    return {
      published: m.createCounter(METRIC_ROW_EVENTS_PUBLISHED, {
        description: 'Context-row events the relay published (committed with Kafka transactions), by outbox shard',
        unit: '{event}',
      }),
      batches: m.createCounter(METRIC_ROW_EVENT_BATCHES, {
        description: 'Row-outbox batches the relay published and removed, by outbox shard',
        unit: '{batch}',
      }),
      failures: m.createCounter(METRIC_ROW_EVENT_FAILURES, {
        description: 'Row relay attempts that failed and are tried again, by outbox shard and stage',
        unit: '{failure}',
      }),
    };
  });
  return {
    published({ shard, events }) {
      const attributes = { [ATTR_OUTBOX_SHARD]: shard };
      if (events > 0) instruments().published.add(events, attributes);
      instruments().batches.add(1, attributes);
    },
    failed({ shard, stage }) {
      instruments().failures.add(1, { [ATTR_OUTBOX_SHARD]: shard, [ATTR_RELAY_STAGE]: stage });
    },
  };
}
