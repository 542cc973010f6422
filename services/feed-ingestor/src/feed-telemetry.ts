import {
  ATTR_FEED_REASON,
  ATTR_FEED_SOURCE,
  lazy,
  METRIC_FEED_INGESTED,
  METRIC_FEED_REFUSED,
  meterOf,
  noopSpan,
  type SpanRunner,
  spanRunner,
  type TelemetryHandles,
} from '@ctxflow/telemetry';

/* The feed-ingestor's telemetry on OpenTelemetry: ingested and refused counters, webhook and publish spans. */

/** What the feed-ingestor reports about webhook deliveries. */
export interface FeedTelemetry extends SpanRunner {
  /** A ticket update was accepted and published (duplicates included: they are accepted). Adds 1 to `ctxflow.feed.ingested` by source. */
  ingested(e: { source: string }): void;
  /** A delivery was refused (bad signature, bad body, stale timestamp...). Adds 1 to `ctxflow.feed.refused` by source and reason (an error code). */
  refused(e: { source: string; reason: string }): void;
}

export const noopFeedTelemetry: FeedTelemetry = {
  ingested() {},
  refused() {},
  withSpan: noopSpan,
};

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
