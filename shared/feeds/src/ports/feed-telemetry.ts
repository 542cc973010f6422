import { noopSpan, type SpanRunner } from '@ctxflow/telemetry';

/** What the feed routes report about webhook deliveries (implemented on OpenTelemetry by adapters/otel-feed-telemetry.ts). */
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
