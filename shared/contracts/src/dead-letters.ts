/**
 * Dead letters: a consumed record that cannot be handled is published, as it
 * was (key, value, headers), onto its topic's dead-letter topic with these
 * headers added, BEFORE the consumer's offset moves past it. Nothing is lost:
 * a dead letter that is not acknowledged makes the consumer retry the record.
 */
import { z } from 'zod';
import { capText } from './limits.ts';
import { TOPICS } from './topics.ts';

/** Why a record was dead-lettered. */
export const DEAD_LETTER_REASONS = ['not_json', 'invalid', 'failed'] as const;
/**
 * - `not_json`: the value is not JSON text;
 * - `invalid`: JSON, but not a valid record of its topic's schema;
 * - `failed`: valid, but handling it failed with an error retrying cannot fix
 *   (a non-retryable error code, e.g. `state_session_not_found`).
 */
export type DeadLetterReason = (typeof DEAD_LETTER_REASONS)[number];

/** Headers a dead letter carries besides its source record's own. */
export const DLQ_HEADERS = {
  /** One of DEAD_LETTER_REASONS. */
  reason: 'ctxflow-dlq-reason',
  /** What went wrong, at most MAX_DLQ_ERROR_LENGTH characters. */
  error: 'ctxflow-dlq-error',
  /** The source record's topic, as the broker names it (with any KAFKA_TOPIC_PREFIX). */
  topic: 'ctxflow-dlq-topic',
  /** The source record's partition, decimal. */
  partition: 'ctxflow-dlq-partition',
  /** The source record's offset, decimal. */
  offset: 'ctxflow-dlq-offset',
  /**
   * On a replay marker only (a record `npm run dlq -- replay` writes onto the
   * dead-letter topic after re-publishing): `<topic>:<partition>:<offset>` of
   * the source record it replayed. Marker records carry no reason header.
   */
  replayed: 'ctxflow-dlq-replayed',
} as const;

/** Most characters of the `ctxflow-dlq-error` header. */
export const MAX_DLQ_ERROR_LENGTH = 512;

/** The headers of a dead letter (besides its source record's own, which are kept). */
export const deadLetterHeadersSchema = z.looseObject({
  [DLQ_HEADERS.reason]: z.enum(DEAD_LETTER_REASONS),
  [DLQ_HEADERS.error]: z.string().max(MAX_DLQ_ERROR_LENGTH),
  [DLQ_HEADERS.topic]: z.string().min(1),
  [DLQ_HEADERS.partition]: z.string().regex(/^\d+$/),
  [DLQ_HEADERS.offset]: z.string().regex(/^\d+$/),
});

/** The headers of a replay marker on a dead-letter topic (its value is empty). */
export const replayMarkerHeadersSchema = z.looseObject({
  [DLQ_HEADERS.replayed]: z.string().regex(/^.+:\d+:\d+$/),
});

/** The dead-letter topic of each consumed topic (unprefixed names). */
export const DLQ_TOPIC_OF: Readonly<Record<string, string>> = {
  [TOPICS.ticketUpdates]: TOPICS.ticketUpdatesDlq,
  [TOPICS.stepRequests]: TOPICS.stepRequestsDlq,
};

/** A consumed record, as much of it as a dead letter needs. */
export interface DeadLetterSource {
  topic: string;
  partition: number;
  offset: string;
  key: string;
  value: string;
  headers: Record<string, string>;
}

/**
 * The dead letter of `record`: its key, value and headers kept, the DLQ
 * headers added (they replace any DLQ headers the record had, e.g. a record
 * dead-lettered again after a replay names its latest position).
 */
export function deadLetterOf(
  record: DeadLetterSource,
  reason: DeadLetterReason,
  error: string,
): { key: string; value: string; headers: Record<string, string> } {
  return {
    key: record.key,
    value: record.value,
    headers: {
      ...record.headers,
      [DLQ_HEADERS.reason]: reason,
      [DLQ_HEADERS.error]: capText(error, MAX_DLQ_ERROR_LENGTH),
      [DLQ_HEADERS.topic]: record.topic,
      [DLQ_HEADERS.partition]: String(record.partition),
      [DLQ_HEADERS.offset]: record.offset,
    },
  };
}
