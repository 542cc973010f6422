/**
 * In-memory telemetry for tests (@ctxflow/telemetry's createTestTelemetry:
 * providers of its own, never the globals) with each service's telemetry
 * object built on it: the session-runner's ContextTelemetry, the
 * feed-ingestor's FeedTelemetry and step-context's ConsumerTelemetry.
 */

import { createFeedTelemetry, type FeedTelemetry } from '@ctxflow/feeds';
import { type ContextTelemetry, createContextTelemetry } from '@ctxflow/session-runner';
import { type ConsumerTelemetry, createConsumerTelemetry } from '@ctxflow/step-context';
import { createTestTelemetry as createProviders, type TestTelemetry as Providers } from '@ctxflow/telemetry';

export interface TestTelemetry extends Providers {
  contextTelemetry: ContextTelemetry;
  feedTelemetry: FeedTelemetry;
  consumerTelemetry: ConsumerTelemetry;
}

export function createTestTelemetry(): TestTelemetry {
  const providers = createProviders();
  return {
    ...providers,
    contextTelemetry: createContextTelemetry(providers),
    feedTelemetry: createFeedTelemetry(providers),
    consumerTelemetry: createConsumerTelemetry(providers),
  };
}
