/**
 * Writes docs/asyncapi.yaml, the AsyncAPI 3.0 contract of ctxflow's Kafka
 * topics: channels, keys, headers, and payload and header schemas generated
 * from the zod schemas in shared/contracts (zod 4's `z.toJSONSchema`, JSON
 * Schema draft-07, which AsyncAPI's default schema format accepts).
 *
 *   npm run asyncapi              rewrite it
 *   npm run asyncapi -- --check   exit 1 when the file differs from what the schemas give
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  CONTEXT_ROW_EVENT_TYPE,
  contextRowEventDataSchema,
  contextRowEventHeadersSchema,
  DEAD_LETTER_REASONS,
  DLQ_HEADERS,
  deadLetterHeadersSchema,
  FEED_SOURCES,
  MAX_DLQ_ERROR_LENGTH,
  RECORD_ID_HEADER,
  recordHeadersSchema,
  replayMarkerHeadersSchema,
  stepRequestSchema,
  stepResultRecordSchema,
  TOPICS,
  ticketUpdateSchema,
} from '@ctxflow/contracts';
import { stringify } from 'yaml';
import { z } from 'zod';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const ASYNCAPI_PATH = join(ROOT, 'docs', 'asyncapi.yaml');

/**
 * A zod schema as JSON Schema draft-07 without its `$schema` keyword.
 * `io: 'input'` for what producers send (defaults may be left out), `output`
 * for what ctxflow publishes.
 */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { target: 'draft-7', io, unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  return rest;
}

/** The TicketUpdate schema with its `source` naming the built-in feeds (the schema itself takes any source name). */
function withFeedSources(schema: Record<string, unknown>): Record<string, unknown> {
  const properties = schema.properties as Record<string, Record<string, unknown>>;
  properties.source = {
    ...properties.source,
    description: `The feed it came in on: a built-in one (POST /feeds/<source>), or a configured source name (CTXFLOW_FEED_SECRET_<NAME>, the generic format).`,
    examples: [...FEED_SOURCES],
  };
  return schema;
}

const KAFKA_BINDING = '0.5.0';
const ref = (path: string) => ({ $ref: path });

const EXACTLY_ONCE = `Exactly-once rules.
- Producers are idempotent (acks=all) but that ends at a producer restart: every record carries its own id
  (a ticket update's \`id\`, echoed in the \`${RECORD_ID_HEADER}\` header; a step request's \`requestId\`, echoed in
  the \`${RECORD_ID_HEADER}\` header of its result) and every sink drops a record whose id it has applied.
- Keys fix the partition and so the order: ticket updates by \`<source>:<ticket>\` (one ticket's updates stay
  in order), step requests and results by session id (one session's steps stay in order). A dead letter keeps
  its source record's key.
- Consumers store the consumed offset in the same atomic write as their output (step-context: Redis) or commit
  it after the output is acknowledged (session-runner), and resume from there: a redelivery changes nothing.
- A record a consumer cannot handle (not JSON, invalid, or failing with a non-retryable error) is published onto
  the topic's dead-letter topic, and acknowledged there, before its offset is recorded: nothing is lost.
  \`npm run dlq -- list|replay\` shows and re-publishes dead letters; a replay is idempotent (replay markers).
- Context-row events (\`${TOPICS.contextRows}\`, on with CTXFLOW_CONTEXT_ROW_EVENTS) are written to an outbox in the
  commit's own Redis write and relayed after it; an outbox entry is removed only after Kafka acknowledged its event.
  The topic holds every committed row's event at least once: a relay that dies between Kafka's acknowledgement and
  the removal publishes those events again, identical, with the same \`ce_id\` (the row id). A consumer that keeps
  the first event per \`ce_id\` (and per \`ce_source\`) sees each committed row exactly once, in commit order per session.`;

const VERSIONING = `Versioning. Topic names end in \`.v<N>\`. Within one version a record only gains optional fields;
a change that an existing consumer or producer could not handle gets a new topic name (\`.v2\`), and both
topics are served while producers move. KAFKA_TOPIC_PREFIX prefixes every name (several deployments on one
cluster). Headers not named here are kept and ignored.`;

/** The document, as a plain object. */
export function asyncApiDocument(version: string): Record<string, unknown> {
  const kafkaKey = (description: string) => ({
    kafka: { key: { type: 'string', description }, bindingVersion: KAFKA_BINDING },
  });
  const channel = (address: string, description: string, messages: Record<string, string>) => ({
    address,
    description,
    messages: Object.fromEntries(Object.entries(messages).map(([k, m]) => [k, ref(`#/components/messages/${m}`)])),
    bindings: { kafka: { partitions: 12, replicas: 3, bindingVersion: KAFKA_BINDING } },
  });
  const operation = (action: 'send' | 'receive', channelId: string, summary: string, messages: string[]) => ({
    action,
    channel: ref(`#/channels/${channelId}`),
    summary,
    messages: messages.map((m) => ref(`#/channels/${channelId}/messages/${m}`)),
  });
  const deadLetterMessage = (of: string) => ({
    name: `${of}DeadLetter`,
    title: `A ${of} record that could not be handled`,
    summary: `The source record as it was (key, value, headers), with the ${Object.values(DLQ_HEADERS)
      .filter((h) => h !== DLQ_HEADERS.replayed)
      .map((h) => `\`${h}\``)
      .join(', ')} headers added.`,
    description: `Reasons (\`${DLQ_HEADERS.reason}\`): ${DEAD_LETTER_REASONS.map((r) => `\`${r}\``).join(', ')} - not JSON text;
JSON but not a valid record of the source topic's schema; valid, but its handling failed with an error retrying
cannot fix (the error code and message are in \`${DLQ_HEADERS.error}\`, at most ${MAX_DLQ_ERROR_LENGTH} characters).
\`${DLQ_HEADERS.topic}\` names the source topic as the broker names it (with any KAFKA_TOPIC_PREFIX).`,
    contentType: 'application/octet-stream',
    headers: ref('#/components/schemas/DeadLetterHeaders'),
    payload: { type: 'string', description: "The source record's value, byte for byte (it may not be JSON)." },
    bindings: kafkaKey("The source record's key."),
  });

  return {
    asyncapi: '3.0.0',
    info: {
      title: 'ctxflow topics',
      version,
      description: `The Kafka topics of ctxflow: ticket updates (feed-ingestor to step-context), step requests and
results (any producer to session-runner and back), their dead-letter topics, and the committed context rows as
CloudEvents (session-runner to any consumer). Generated from the zod schemas
in shared/contracts by scripts/asyncapi.ts; do not edit by hand (\`npm run asyncapi\`).

${EXACTLY_ONCE}

${VERSIONING}`,
    },
    defaultContentType: 'application/json',
    servers: {
      kafka: {
        host: 'localhost:9092',
        protocol: 'kafka',
        description: 'Any Kafka 3.5+ cluster: KAFKA_BROKERS names its brokers.',
      },
    },
    channels: {
      ticketUpdates: channel(
        TOPICS.ticketUpdates,
        'Normalized ticket updates, one per accepted webhook delivery (or produced directly).',
        { ticketUpdate: 'TicketUpdate' },
      ),
      stepRequests: channel(TOPICS.stepRequests, 'Requests to run a context pass (a step) of a session.', {
        stepRequest: 'StepRequest',
      }),
      stepResults: channel(TOPICS.stepResults, 'The answer to each step request: the step, or a refusal.', {
        stepResult: 'StepResult',
      }),
      ticketUpdatesDlq: channel(TOPICS.ticketUpdatesDlq, `Dead letters of ${TOPICS.ticketUpdates}.`, {
        ticketUpdateDeadLetter: 'TicketUpdateDeadLetter',
        replayMarker: 'ReplayMarker',
      }),
      stepRequestsDlq: channel(TOPICS.stepRequestsDlq, `Dead letters of ${TOPICS.stepRequests}.`, {
        stepRequestDeadLetter: 'StepRequestDeadLetter',
        replayMarker: 'ReplayMarker',
      }),
      contextRows: channel(
        TOPICS.contextRows,
        'One CloudEvent per committed context row (Kafka binary binding), when CTXFLOW_CONTEXT_ROW_EVENTS is on.',
        { contextRowEvent: 'ContextRowEvent' },
      ),
    },
    operations: {
      publishTicketUpdates: operation(
        'send',
        'ticketUpdates',
        `feed-ingestor publishes each accepted delivery of \`POST /feeds/<source>\`: the built-in sources (${FEED_SOURCES.map((s) => `\`${s}\``).join(', ')}) and every configured one; \`source\` names it.`,
        ['ticketUpdate'],
      ),
      consumeTicketUpdates: operation(
        'receive',
        'ticketUpdates',
        'step-context appends each update to the sessions subscribed to its ticket.',
        ['ticketUpdate'],
      ),
      consumeStepRequests: operation('receive', 'stepRequests', 'session-runner runs the step of each request.', [
        'stepRequest',
      ]),
      publishStepResults: operation('send', 'stepResults', 'session-runner answers each step request.', ['stepResult']),
      deadLetterTicketUpdates: operation(
        'send',
        'ticketUpdatesDlq',
        'step-context dead-letters what it cannot apply; `npm run dlq -- replay` writes replay markers.',
        ['ticketUpdateDeadLetter', 'replayMarker'],
      ),
      deadLetterStepRequests: operation(
        'send',
        'stepRequestsDlq',
        'session-runner dead-letters what it cannot run; `npm run dlq -- replay` writes replay markers.',
        ['stepRequestDeadLetter', 'replayMarker'],
      ),
      publishContextRows: operation(
        'send',
        'contextRows',
        'session-runner (and the embedded app, on its in-process bus) relays each committed context row from its outbox.',
        ['contextRowEvent'],
      ),
    },
    components: {
      messages: {
        TicketUpdate: {
          name: 'TicketUpdate',
          title: 'A normalized ticket update',
          summary: `\`id\` (\`<source>:<eventId>\`) is unique per delivery of one tenant; \`${RECORD_ID_HEADER}\` repeats it.`,
          headers: ref('#/components/schemas/RecordHeaders'),
          payload: ref('#/components/schemas/TicketUpdate'),
          bindings: kafkaKey('`<source>:<ticket>`: one ticket keeps its order.'),
        },
        StepRequest: {
          name: 'StepRequest',
          title: 'Run a step of a session',
          summary: '`requestId` makes a redelivery a no-op: the step it committed is answered again.',
          headers: ref('#/components/schemas/RecordHeaders'),
          payload: ref('#/components/schemas/StepRequest'),
          bindings: kafkaKey('The session id: one session keeps its order.'),
        },
        StepResult: {
          name: 'StepResult',
          title: 'The answer to a step request',
          summary: `\`${RECORD_ID_HEADER}\` is the \`requestId\`; keep the first \`ok: true\` result per requestId.`,
          headers: ref('#/components/schemas/RecordHeaders'),
          payload: ref('#/components/schemas/StepResult'),
          bindings: kafkaKey('The session id.'),
        },
        TicketUpdateDeadLetter: deadLetterMessage('TicketUpdate'),
        StepRequestDeadLetter: deadLetterMessage('StepRequest'),
        ContextRowEvent: {
          name: 'ContextRowEvent',
          title: 'A committed context row',
          summary: `A CloudEvent of type \`${CONTEXT_ROW_EVENT_TYPE}\` in the Kafka binary binding: the attributes in \`ce_*\` headers, the data as the value. \`ce_id\` is the row id: keep the first event per id.`,
          headers: ref('#/components/schemas/ContextRowEventHeaders'),
          payload: ref('#/components/schemas/ContextRowEvent'),
          bindings: kafkaKey('The session id (`ce_partitionkey`): one session keeps its order.'),
        },
        ReplayMarker: {
          name: 'ReplayMarker',
          title: 'A dead letter was replayed',
          summary: `Written by \`npm run dlq -- replay\` after the source topic acknowledged the re-published record; \`${DLQ_HEADERS.replayed}\` names the source position (\`<topic>:<partition>:<offset>\`) so no later replay publishes it again.`,
          contentType: 'application/octet-stream',
          headers: ref('#/components/schemas/ReplayMarkerHeaders'),
          payload: { type: 'string', maxLength: 0, description: 'Empty.' },
          bindings: kafkaKey("The replayed record's key."),
        },
      },
      schemas: {
        TicketUpdate: withFeedSources(jsonSchema(ticketUpdateSchema, 'input')),
        StepRequest: jsonSchema(stepRequestSchema, 'input'),
        StepResult: jsonSchema(stepResultRecordSchema, 'output'),
        RecordHeaders: jsonSchema(recordHeadersSchema, 'input'),
        DeadLetterHeaders: jsonSchema(deadLetterHeadersSchema, 'output'),
        ReplayMarkerHeaders: jsonSchema(replayMarkerHeadersSchema, 'output'),
        ContextRowEvent: jsonSchema(contextRowEventDataSchema, 'output'),
        ContextRowEventHeaders: jsonSchema(contextRowEventHeadersSchema, 'output'),
      },
    },
  };
}

/** The file's text. */
export function renderAsyncApi(): string {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const header =
    '# Generated by scripts/asyncapi.ts from the zod schemas in shared/contracts. Do not edit:\n# run `npm run asyncapi`; a test fails when this file is stale.\n';
  return header + stringify(asyncApiDocument(pkg.version), { lineWidth: 0, aliasDuplicateObjects: false });
}

if (import.meta.main) {
  const text = renderAsyncApi();
  if (process.argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(ASYNCAPI_PATH, 'utf8');
    } catch {}
    if (current !== text) {
      process.stderr.write('docs/asyncapi.yaml is stale: run `npm run asyncapi`\n');
      process.exitCode = 1;
    }
  } else {
    writeFileSync(ASYNCAPI_PATH, text);
  }
}
