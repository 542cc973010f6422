/**
 * Every span, metric and event name ctxflow emits, and every attribute key it
 * puts on them. Nothing else spells these strings: dashboards, alerts and tests
 * read them from here. README.md in this package lists each with its unit.
 *
 * Metric attributes are low-cardinality by contract (kind, source, reason,
 * mode): session and step ids go on spans and log records only.
 */

/** Instrumentation scope of every meter, logger and tracer ctxflow creates. */
export const INSTRUMENTATION_SCOPE = 'ctxflow';

// ---------------------------------------------------------------- attributes

/** Session the record is about (spans, log records; never a metric attribute). */
export const ATTR_SESSION_ID = 'ctxflow.session_id';
/** Step (one model call) the record is about (spans, log records). */
export const ATTR_STEP_ID = 'ctxflow.step_id';
/** Why the stepContext hook or a memory recall was skipped: one of {@link SKIP_REASONS}. */
export const ATTR_SKIP_REASON = 'ctxflow.skip.reason';
/** Human-readable detail of a skip (log records only). */
export const ATTR_SKIP_MESSAGE = 'ctxflow.skip.message';
/** Row kind: instruction, notice, tools, memory. */
export const ATTR_ROW_KIND = 'ctxflow.row.kind';
/** Row source: app, hook, tool, memory, late-answer. */
export const ATTR_ROW_SOURCE = 'ctxflow.row.source';
/** Step mode: first, retry, forced_completion. */
export const ATTR_STEP_MODE = 'ctxflow.step.mode';
/** Number of rows a commit wrote (spans). */
export const ATTR_ROW_COUNT = 'ctxflow.row.count';
/** Feed source, e.g. generic, github, jira, zendesk. */
export const ATTR_FEED_SOURCE = 'ctxflow.feed.source';
/** Why a feed delivery was refused, e.g. an error code such as `unauthorized`. */
export const ATTR_FEED_REASON = 'ctxflow.feed.reason';
/** Delivery id of a ticket update (spans). */
export const ATTR_FEED_EVENT_ID = 'ctxflow.feed.event_id';
/** Ticket an update is about (spans). */
export const ATTR_TICKET = 'ctxflow.ticket';
/** Stream cursor a batch or commit ends at (spans). */
export const ATTR_CURSOR = 'ctxflow.cursor';
/** Kafka topic (consumer lag, publish spans). */
export const ATTR_TOPIC = 'ctxflow.topic';
/** Kafka consumer group (consumer lag). */
export const ATTR_CONSUMER_GROUP = 'ctxflow.consumer.group';
/** Why a record went to a dead-letter topic: not_json, invalid, failed. */
export const ATTR_DLQ_REASON = 'ctxflow.dlq.reason';
/** Kafka partition (consumer lag). */
export const ATTR_PARTITION = 'ctxflow.partition';
/** The row-outbox shard a relay batch belongs to (a number). */
export const ATTR_OUTBOX_SHARD = 'ctxflow.outbox.shard';
/** Where a relay attempt failed: `lease`, `takeover`, `read`, `receipts`, `publish`, `remove`. */
export const ATTR_RELAY_STAGE = 'ctxflow.relay.stage';
/**
 * Why a stored consumer offset does not fit its partition's log: `topic_id`
 * (it was read from another topic of that name), `beyond_end` (past the log's
 * end), `below_start` (retention deleted records it had not read).
 */
export const ATTR_OFFSET_MISMATCH = 'ctxflow.offset.mismatch';
/** What was done about it, the consumer's reset policy: earliest, latest, fail. */
export const ATTR_OFFSET_RESET = 'ctxflow.offset.reset';
/** Tenant a provider-usage metric is about (tenants are configured, so few). */
export const ATTR_TENANT = 'ctxflow.tenant';
/** Provider format of a usage report: openai-chat, openai-responses, anthropic. */
export const ATTR_PROVIDER_FORMAT = 'ctxflow.provider.format';
/** Input tokens the provider read from its prompt cache (log records). */
export const ATTR_CACHED_TOKENS = 'ctxflow.provider.cached_tokens';
/** Input tokens the step's unchanged prefix predicted the provider would read from cache (log records). */
export const ATTR_PREDICTED_TOKENS = 'ctxflow.provider.predicted_tokens';
/** Outcome of one receipt webhook call: `sent`, `retried`, `dead_lettered`. */
export const ATTR_RECEIPT_OUTCOME = 'ctxflow.receipt.outcome';

// ---------------------------------------------------------------- skip reasons

/** Values of {@link ATTR_SKIP_REASON}. */
export const SKIP_REASON_HOOK_ERROR = 'hook_error';
export const SKIP_REASON_HOOK_TIMEOUT = 'hook_timeout';
export const SKIP_REASON_HOOK_INVALID = 'hook_invalid';
export const SKIP_REASON_MEMORY_TOO_LARGE = 'memory_too_large';
export const SKIP_REASONS = [
  SKIP_REASON_HOOK_ERROR,
  SKIP_REASON_HOOK_TIMEOUT,
  SKIP_REASON_HOOK_INVALID,
  SKIP_REASON_MEMORY_TOO_LARGE,
] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];

// ---------------------------------------------------------------- events

/**
 * A log record with this `eventName`, severity WARN, attributes
 * session id, step id, skip reason and skip message, body the message.
 * Emitted once per skipped hook call or oversized memory recall (R26, R34).
 */
export const EVENT_CONTEXT_SKIPPED = 'core.context.skipped';

/**
 * A log record with this `eventName`, severity WARN, attributes session id, step id,
 * tenant, provider format, cached tokens and predicted tokens: a step whose provider read
 * fewer tokens from its cache than the step's unchanged prefix predicted (a prefix broken
 * between ctxflow and the provider: a runtime that reorders tools, a proxy that rewrites the
 * system prompt). Emitted once per such usage report.
 */
export const EVENT_PROVIDER_CACHE_SHORTFALL = 'core.provider_cache.shortfall';

// ---------------------------------------------------------------- metrics

/** Counter, unit `{skip}`, attributes: skip reason. */
export const METRIC_CONTEXT_SKIPPED = 'ctxflow.context.skipped';
/** Counter, unit `{row}`: context rows committed, attributes: row kind, row source. */
export const METRIC_CONTEXT_ROWS = 'ctxflow.context.rows';
/** Counter, unit `{update}`: ticket updates accepted and published, attributes: feed source. */
export const METRIC_FEED_INGESTED = 'ctxflow.feed.ingested';
/** Counter, unit `{update}`: deliveries refused, attributes: feed source, feed reason. */
export const METRIC_FEED_REFUSED = 'ctxflow.feed.refused';
/** Histogram, unit `ms`: wall time of one context pass up to its commit, attributes: step mode. */
export const METRIC_CONTEXT_PASS_DURATION = 'ctxflow.context_pass.duration';
/** Histogram, unit `By`: bytes of the model request shared with the previous request, attributes: step mode. */
export const METRIC_PREFIX_REUSED_BYTES = 'ctxflow.prompt.prefix_reused_bytes';
/** Histogram, unit `1` (0..1): reused prefix bytes / request bytes, attributes: step mode. */
export const METRIC_PREFIX_REUSE_RATIO = 'ctxflow.prompt.prefix_reuse_ratio';
/** Gauge, unit `{record}`: records behind the partition's end, attributes: consumer group, topic, partition. */
export const METRIC_CONSUMER_LAG = 'ctxflow.consumer.lag';
/**
 * Counter, unit `{record}`: consumed records published onto a dead-letter
 * topic, attributes: consumer group, topic (the source), dead-letter reason.
 */
export const METRIC_DEAD_LETTERS = 'ctxflow.consumer.dead_letters';
/**
 * Counter, unit `{partition}`: assignments whose stored offset did not fit the
 * partition's log (another topic id, past its end, below its start), attributes:
 * consumer group, topic, partition, offset mismatch, offset reset.
 */
export const METRIC_OFFSET_MISMATCHES = 'ctxflow.consumer.offset_mismatches';

/** Counter, unit `{event}`: context-row events the relay published (committed), attributes: outbox shard. */
export const METRIC_ROW_EVENTS_PUBLISHED = 'ctxflow.row_events.published';
/** Counter, unit `{batch}`: outbox batches the relay published and removed, attributes: outbox shard. */
export const METRIC_ROW_EVENT_BATCHES = 'ctxflow.row_events.batches';
/** Counter, unit `{failure}`: relay attempts that failed (tried again), attributes: outbox shard, relay stage. */
export const METRIC_ROW_EVENT_FAILURES = 'ctxflow.row_events.failures';

/** Counter, unit `{token}`: input tokens of model requests as the provider reported them, attributes: tenant, provider format. */
export const METRIC_PROVIDER_INPUT_TOKENS = 'ctxflow.provider.input_tokens';
/**
 * Counter, unit `{token}`: of those, tokens the provider read from its prompt cache,
 * attributes: tenant, provider format. The real hit ratio is this over
 * {@link METRIC_PROVIDER_INPUT_TOKENS}.
 */
export const METRIC_PROVIDER_CACHED_TOKENS = 'ctxflow.provider.cached_tokens';
/** Counter, unit `{token}`: tokens the steps' unchanged prefixes predicted cached, attributes: tenant, provider format. */
export const METRIC_PROVIDER_PREDICTED_TOKENS = 'ctxflow.provider.predicted_tokens';
/**
 * Counter, unit `{step}`: steps whose provider cached less than their unchanged prefix
 * predicted ({@link EVENT_PROVIDER_CACHE_SHORTFALL}), attributes: tenant, provider format.
 */
export const METRIC_PROVIDER_CACHE_SHORTFALLS = 'ctxflow.provider.cache_shortfalls';
/**
 * Counter, unit `{call}`: calls of the receipt webhook (CTXFLOW_RECEIPT_URL), attributes:
 * receipt outcome (`sent`: answered 2xx; `retried`: failed, due again later;
 * `dead_lettered`: failed for the last time or refused, moved to the dead-letter path).
 */
export const METRIC_RECEIPT_WEBHOOK_CALLS = 'ctxflow.receipt_webhook.calls';
/**
 * Observable gauge, unit `{receipt}`: receipts on the receipt webhook's dead-letter path
 * waiting for a replay (`npm run dlq -- replay --topic receipts`), read from the queue's
 * count on each collection; no attributes.
 */
export const METRIC_RECEIPT_DEAD_LETTERS = 'ctxflow.receipt_webhook.dead_letters';

// ---------------------------------------------------------------- spans

/** feed-ingestor: one webhook delivery, from raw body to answer. */
export const SPAN_WEBHOOK_INGEST = 'ctxflow.webhook.ingest';
/** feed-ingestor: publishing one ticket update until Kafka acknowledged. */
export const SPAN_PUBLISH = 'ctxflow.update.publish';
/** step-context: applying one ticket update to the feed streams subscribed sessions follow. */
export const SPAN_STEP_CONTEXT_APPLY = 'ctxflow.step_context.apply';
/** session-runner: one context pass (queue, hook, memory, commit). */
/**
 * One ticket update delivered as a row, in the update's own trace (child of its
 * apply span, CONSUMER, linked to the context pass): the trace of a webhook
 * ends in the session-runner at the step that commits the row.
 */
export const SPAN_CONTEXT_DELIVER = 'ctxflow.context.deliver';
export const SPAN_CONTEXT_PASS = 'ctxflow.context_pass';
/** session-runner: the one atomic store commit of a pass. */
export const SPAN_STORE_COMMIT = 'ctxflow.store.commit';
