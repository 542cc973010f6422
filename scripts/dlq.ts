/**
 * Dead-letter topics, for operators: shows what the consumers could not
 * handle and re-publishes it to its source topic once the cause is fixed.
 *
 *   npm run dlq -- list   [--topic ticket-updates|step-requests] [--reason not_json|invalid|failed] [--offset N] [--all]
 *   npm run dlq -- replay [--topic ticket-updates|step-requests] [--reason ...] [--offset N]
 *   npm run dlq -- list|replay --topic receipts [--tenant T] [--id rcpt_...]   (scripts/receipt-dlq.ts)
 *
 * Reads KAFKA_BROKERS, KAFKA_TOPIC_PREFIX and the secured-connection variables
 * (KAFKA_SSL, KAFKA_SSL_CA_FILE, KAFKA_SSL_CERT_FILE, KAFKA_SSL_KEY_FILE,
 * KAFKA_SASL_MECHANISM, KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD[_FILE],
 * KAFKA_SASL_OAUTHBEARER_TOKEN_FILE) as the services do, with the same
 * schema: a configuration a service refuses is refused here too. Without
 * --topic both dead-letter topics are read. --offset N keeps the dead letters
 * of source offset N (`ctxflow-dlq-offset`; add --partition P to name one
 * partition). `list` leaves replayed ones out unless --all is given.
 *
 * Replay is idempotent: a dead letter is re-published (its key, value and
 * headers, the DLQ headers removed, so the record id header travels on) to the
 * topic named in its `ctxflow-dlq-topic` header; once that publish is
 * acknowledged, a marker record is written onto the dead-letter topic
 * (header `ctxflow-dlq-replayed: <topic>:<partition>:<offset>`, empty value).
 * A later replay reads the markers and skips every dead letter of a source
 * position already replayed, whichever filter either run used; the same
 * source position dead-lettered twice (a redelivery) is replayed once. Should
 * the tool stop between a publish and its marker, the next replay publishes
 * the record again and the record id makes it a duplicate the sink drops:
 * step-context appends an update id once per session; the runner answers a
 * requestId it already committed with that same step.
 * A replayed record that is still poison is dead-lettered again, under its
 * new source position, and can be replayed again after the next fix.
 */
import { parseArgs } from 'node:util';
import { createBus, type IncomingRecord, type KafkaBusOptions, type OutgoingRecord, readTopic } from '@ctxflow/bus';
import { DEAD_LETTER_REASONS, DLQ_HEADERS, TOPICS } from '@ctxflow/contracts';
import {
  type AuditLog,
  ConfigError,
  connectionSecurity,
  connectionSecurityVars,
  createAuditLog,
  createLogger,
  hostListVar,
  kafkaBusSecurity,
  parseConfig,
  redisUrlVar,
  topicPrefixVar,
} from '@ctxflow/service-kit';
import { z } from 'zod';
import { type ReceiptDlqConnection, receiptDlqConnectionFromEnv, runReceiptDlq } from './receipt-dlq.ts';

/** `--topic receipts`: the receipt webhook's dead letters, on Redis (scripts/receipt-dlq.ts). */
export const RECEIPTS_TOPIC = 'receipts';

export const DLQ_TOPICS = {
  'ticket-updates': TOPICS.ticketUpdatesDlq,
  'step-requests': TOPICS.stepRequestsDlq,
} as const;

export interface DlqOptions {
  brokers: string[];
  /** TLS to the brokers (KAFKA_SSL*); absent: plaintext. */
  tls?: KafkaBusOptions['tls'];
  /** SASL (KAFKA_SASL_*); absent: none. */
  sasl?: KafkaBusOptions['sasl'];
  /** KAFKA_TOPIC_PREFIX; default none. */
  topicPrefix?: string;
  /** Which dead-letter topics; default both. */
  topics?: (keyof typeof DLQ_TOPICS)[];
  reason?: string;
  /** Source offset (`ctxflow-dlq-offset`). */
  offset?: string;
  /** Source partition (`ctxflow-dlq-partition`). */
  partition?: number;
  /** Replay only: one audit line per re-published record (`dead-letters.replay`, its source position). */
  audit?: { log: AuditLog; subject: string };
}

/** The connection part of {@link DlqOptions}. */
export type DlqConnection = Pick<DlqOptions, 'brokers' | 'topicPrefix' | 'tls' | 'sasl'>;

/**
 * The services' Kafka variables: brokers, topic prefix and connectionSecurityVars
 * (REDIS_URL and REDIS_CLUSTER_NODES too, so the Redis checks of a shared
 * environment judge it as the services do).
 */
const dlqEnvSchema = z
  .object({
    KAFKA_BROKERS: hostListVar(),
    KAFKA_TOPIC_PREFIX: topicPrefixVar(),
    REDIS_URL: redisUrlVar(),
    REDIS_CLUSTER_NODES: hostListVar(),
    ...connectionSecurityVars(),
  })
  .transform((env, ctx): DlqConnection => {
    const { kafkaSecurity } = connectionSecurity(env, ctx);
    if (env.KAFKA_BROKERS === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['KAFKA_BROKERS'],
        message: 'not set: the dead-letter topics live on Kafka',
      });
    }
    return {
      brokers: env.KAFKA_BROKERS ?? [],
      topicPrefix: env.KAFKA_TOPIC_PREFIX,
      ...kafkaBusSecurity(kafkaSecurity),
    };
  });

/**
 * Brokers, prefix, TLS and SASL from the environment, parsed as the services
 * parse theirs; throws a ConfigError naming every variable in error.
 */
export function dlqConnectionFromEnv(env: Record<string, string | undefined>): DlqConnection {
  return parseConfig(dlqEnvSchema, env);
}

/** The bus options of a DLQ run: TLS and SASL only when configured. */
function kafkaOptions(options: DlqOptions): Pick<KafkaBusOptions, 'brokers' | 'clientId' | 'tls' | 'sasl'> {
  return {
    clientId: 'ctxflow-dlq',
    brokers: options.brokers,
    ...(options.tls === undefined ? {} : { tls: options.tls }),
    ...(options.sasl === undefined ? {} : { sasl: options.sasl }),
  };
}

/** One dead letter as `list` shows it. */
export interface DeadLetter {
  /** The dead-letter topic and the record's place on it. */
  dlq: { topic: string; partition: number; offset: string };
  /** The source record's topic, partition and offset. */
  source: { topic: string; partition: number; offset: string };
  reason: string;
  error: string;
  key: string;
  value: string;
  headers: Record<string, string>;
  /** A replay marker names its source position. */
  replayed: boolean;
}

function sourceId(s: { topic: string; partition: number; offset: string }): string {
  return `${s.topic}:${s.partition}:${s.offset}`;
}

/** The dead letters of the chosen topics, with whether each was replayed, filtered. */
export async function listDeadLetters(options: DlqOptions): Promise<DeadLetter[]> {
  const prefix = options.topicPrefix ?? '';
  const names = (options.topics ?? (Object.keys(DLQ_TOPICS) as (keyof typeof DLQ_TOPICS)[])).map(
    (t) => `${prefix}${DLQ_TOPICS[t]}`,
  );
  const out: DeadLetter[] = [];
  for (const topic of names) {
    const records = await readTopic(kafkaOptions(options), topic);
    const replayed = new Set<string>();
    for (const r of records) {
      const marker = r.headers[DLQ_HEADERS.replayed];
      if (marker !== undefined) replayed.add(marker);
    }
    for (const r of records) {
      const reason = r.headers[DLQ_HEADERS.reason];
      if (reason === undefined) continue; // a marker
      const letter = deadLetterOf(r, reason);
      letter.replayed = replayed.has(sourceId(letter.source));
      if (options.reason !== undefined && reason !== options.reason) continue;
      if (options.offset !== undefined && letter.source.offset !== options.offset) continue;
      if (options.partition !== undefined && letter.source.partition !== options.partition) continue;
      out.push(letter);
    }
  }
  return out;
}

function deadLetterOf(r: IncomingRecord, reason: string): DeadLetter {
  return {
    dlq: { topic: r.topic, partition: r.partition, offset: r.offset },
    source: {
      topic: r.headers[DLQ_HEADERS.topic] ?? '',
      partition: Number(r.headers[DLQ_HEADERS.partition] ?? -1),
      offset: r.headers[DLQ_HEADERS.offset] ?? '',
    },
    reason,
    error: r.headers[DLQ_HEADERS.error] ?? '',
    key: r.key,
    value: r.value,
    headers: r.headers,
    replayed: false,
  };
}

/** What replay re-publishes for a dead letter: the source record, or a corrected version of it. */
export type ReplayTransform = (letter: DeadLetter) => OutgoingRecord;

/** The source record: key, value, and the headers without the DLQ ones. */
export function sourceRecordOf(letter: DeadLetter): OutgoingRecord {
  const dlqHeaders = new Set<string>(Object.values(DLQ_HEADERS));
  const headers = Object.fromEntries(Object.entries(letter.headers).filter(([name]) => !dlqHeaders.has(name)));
  return { key: letter.key, value: letter.value, headers };
}

/**
 * Re-publishes the dead letters not yet replayed (see the file comment), each
 * source position once, and marks them; resolves to what it re-published.
 * `transform` corrects a record on the way (a value fixed by hand).
 */
export async function replayDeadLetters(
  options: DlqOptions,
  transform: ReplayTransform = sourceRecordOf,
): Promise<DeadLetter[]> {
  const letters = (await listDeadLetters(options)).filter((l) => !l.replayed);
  const bus = createBus({ client: 'kafkajs', ...kafkaOptions(options) });
  const replayed: DeadLetter[] = [];
  const seen = new Set<string>();
  try {
    for (const letter of letters) {
      const id = sourceId(letter.source);
      if (seen.has(id) || letter.source.topic === '') continue;
      seen.add(id);
      await bus.publisher.publish(letter.source.topic, [transform(letter)]);
      // Only after the source topic acknowledged: a marker never stands for a record not re-published.
      await bus.publisher.publish(letter.dlq.topic, [
        { key: letter.key, value: '', headers: { [DLQ_HEADERS.replayed]: id } },
      ]);
      replayed.push(letter);
      options.audit?.log.record({
        tenant: '*',
        subject: options.audit.subject,
        action: 'dead-letters.replay',
        target: id,
        outcome: 'ok',
      });
    }
  } finally {
    await bus.publisher.close();
    await bus.admin.close();
  }
  return replayed;
}

/** A value as one short line. */
function preview(value: string, max = 60): string {
  const line = JSON.stringify(value);
  return line.length <= max ? line : `${line.slice(0, max - 3)}...`;
}

function row(l: DeadLetter): string {
  return [
    `${l.source.topic}[${l.source.partition}]@${l.source.offset}`,
    l.reason,
    l.replayed ? 'replayed' : 'pending',
    `key=${JSON.stringify(l.key)}`,
    `error=${JSON.stringify(l.error)}`,
    `value=${preview(l.value)}`,
    `dlq=${l.dlq.topic}[${l.dlq.partition}]@${l.dlq.offset}`,
  ].join('  ');
}

const USAGE = `usage: npm run dlq -- list|replay [--topic ticket-updates|step-requests] [--reason ${DEAD_LETTER_REASONS.join('|')}] [--offset N] [--partition P] [--all]
       npm run dlq -- list|replay --topic ${RECEIPTS_TOPIC} [--tenant T] [--id rcpt_...]`;

/** The receipt webhook's dead letters: on Redis, in the receipt queue (scripts/receipt-dlq.ts). */
async function receiptsMain(command: 'list' | 'replay', values: { tenant?: string; id?: string }): Promise<number> {
  let connection: ReceiptDlqConnection;
  try {
    connection = receiptDlqConnectionFromEnv(process.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`dlq: ${err.message}\n`);
    return 2;
  }
  const filter = {
    ...(values.tenant === undefined ? {} : { tenant: values.tenant }),
    ...(values.id === undefined ? {} : { id: values.id }),
  };
  const log = createAuditLog(createLogger({ service: 'ctxflow-dlq', destination: process.stderr }));
  await runReceiptDlq(command, connection, filter, process.stdout, {
    log,
    subject: `operator:${process.env.USER ?? 'unknown'}`,
  });
  return 0;
}

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      topic: { type: 'string' },
      reason: { type: 'string' },
      offset: { type: 'string' },
      partition: { type: 'string' },
      all: { type: 'boolean', default: false },
      tenant: { type: 'string' },
      id: { type: 'string' },
    },
  });
  const command = positionals[0];
  if ((command !== 'list' && command !== 'replay') || positionals.length !== 1) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  if (values.topic === RECEIPTS_TOPIC) return receiptsMain(command, values);
  let connection: DlqConnection;
  try {
    connection = dlqConnectionFromEnv(process.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`dlq: ${err.message}\n`);
    return 2;
  }
  if (values.topic !== undefined && !(values.topic in DLQ_TOPICS)) {
    process.stderr.write(`--topic must be one of ${[...Object.keys(DLQ_TOPICS), RECEIPTS_TOPIC].join(', ')}\n`);
    return 2;
  }
  if (values.reason !== undefined && !(DEAD_LETTER_REASONS as readonly string[]).includes(values.reason)) {
    process.stderr.write(`--reason must be one of ${DEAD_LETTER_REASONS.join(', ')}\n`);
    return 2;
  }
  if (values.offset !== undefined && !/^\d+$/.test(values.offset)) {
    process.stderr.write('--offset must be a decimal offset\n');
    return 2;
  }
  if (values.partition !== undefined && !/^\d+$/.test(values.partition)) {
    process.stderr.write('--partition must be a partition number\n');
    return 2;
  }
  const options: DlqOptions = { ...connection };
  if (values.topic !== undefined) options.topics = [values.topic as keyof typeof DLQ_TOPICS];
  if (values.reason !== undefined) options.reason = values.reason;
  if (values.offset !== undefined) options.offset = BigInt(values.offset).toString();
  if (values.partition !== undefined) options.partition = Number(values.partition);
  if (command === 'list') {
    const letters = (await listDeadLetters(options)).filter((l) => values.all || !l.replayed);
    for (const l of letters) process.stdout.write(`${row(l)}\n`);
    process.stdout.write(`${letters.length} dead letter(s)\n`);
    return 0;
  }
  // The audit lines go to stderr as JSON; the listing stays on stdout.
  const log = createAuditLog(createLogger({ service: 'ctxflow-dlq', destination: process.stderr }));
  options.audit = { log, subject: `operator:${process.env.USER ?? 'unknown'}` };
  const replayed = await replayDeadLetters(options);
  for (const l of replayed) process.stdout.write(`replayed ${row(l)}\n`);
  process.stdout.write(`${replayed.length} record(s) replayed\n`);
  return 0;
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`dlq: ${(err as Error).message}\n`);
    return 1;
  });
}
