import {
  ATTR_FEED_REASON,
  ATTR_FEED_SOURCE,
  lazy,
  METRIC_FEED_INGESTED,
  METRIC_FEED_REFUSED,
  meterOf,
  spanRunner,
  type TelemetryHandles,
} from '@ctxflow/telemetry';
import type { FeedTelemetry } from '../ports/feed-telemetry.ts';

/* The feed routes' telemetry on OpenTelemetry: ingested and refused counters, webhook and publish spans. */

export function createFeedTelemetry(handles: TelemetryHandles = {}): FeedTelemetry {
  const meter = meterOf(handles);
  const instruments = lazy(() => {
    const m = meter();
    return {
      ingested: m.createCounter(METRIC_FEED_INGESTED, {
        description: 'Ticket updates accepted and published, by source',
        unit: '{update}',
      }),
      refused: m.createCounter(METRIC_FEED_REFUSED, {
        description: 'Feed deliveries refused, by source and reason',
        unit: '{update}',
      }),
    };
  });
  return {
    ingested(e) {
      instruments().ingested.add(1, { [ATTR_FEED_SOURCE]: e.source });
    },
    refused(e) {
      instruments().refused.add(1, { [ATTR_FEED_SOURCE]: e.source, [ATTR_FEED_REASON]: e.reason });
    },
    withSpan: spanRunner(handles),
  };
}
