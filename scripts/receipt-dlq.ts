/**
 * The receipt webhook's dead letters, for operators: the receipts the webhook
 * refused (an answer other than 2xx, 408, 425, 429, 5xx) or failed on for
 * CTXFLOW_RECEIPT_MAX_ATTEMPTS calls. They stay in the receipt queue on Redis
 * (`<prefix>:{receipts}:dead`), never lost, until replayed:
 *
 *   npm run dlq -- list   --topic receipts [--tenant T] [--id rcpt_...]
 *   npm run dlq -- replay --topic receipts [--tenant T] [--id rcpt_...]
 *
 * Reads REDIS_URL or REDIS_CLUSTER_NODES, CTXFLOW_REDIS_PREFIX and the Redis
 * connection variables (REDIS_TLS*, REDIS_USERNAME, REDIS_PASSWORD[_FILE]) as
 * the session-runner does. Replay makes each chosen receipt due at once with
 * its attempts reset; the running senders call the webhook again with the same
 * `webhook-id`. A receipt replayed twice moves once. One audit line per receipt
 * replayed (`receipts.replay`).
 */
import {
  type AuditLog,
  connectionSecurity,
  connectionSecurityVars,
  connectRedis,
  hostListVar,
  parseConfig,
  type RedisSecurity,
  redisUrlVar,
} from '@ctxflow/service-kit';
import { type DeadReceipt, type ReceiptQueue, RedisReceiptQueue } from '@ctxflow/session-runner';
import { z } from 'zod';

export interface ReceiptDlqConnection {
  redisUrl?: string | undefined;
  redisClusterNodes?: string[] | undefined;
  redisSecurity: RedisSecurity;
  prefix: string;
}

const receiptDlqEnvSchema = z
  .object({
    REDIS_URL: redisUrlVar(),
    REDIS_CLUSTER_NODES: hostListVar(),
    CTXFLOW_REDIS_PREFIX: z.string().min(1).default('ctxflow'),
    ...connectionSecurityVars(),
  })
  .transform((env, ctx): ReceiptDlqConnection => {
    const { redisSecurity } = connectionSecurity(env, ctx);
    if (env.REDIS_URL === undefined && env.REDIS_CLUSTER_NODES === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['REDIS_URL'],
        message: "not set (nor REDIS_CLUSTER_NODES): the receipts' dead letters live on Redis",
      });
    }
    return {
      redisUrl: env.REDIS_URL,
      redisClusterNodes: env.REDIS_CLUSTER_NODES,
      redisSecurity,
      prefix: env.CTXFLOW_REDIS_PREFIX,
    };
  });

/** The Redis connection and prefix from the environment; throws a ConfigError naming every variable in error. */
export function receiptDlqConnectionFromEnv(env: Record<string, string | undefined>): ReceiptDlqConnection {
  return parseConfig(receiptDlqEnvSchema, env);
}

export interface ReceiptDlqFilter {
  tenant?: string;
  id?: string;
}

function chosen(letters: DeadReceipt[], filter: ReceiptDlqFilter): DeadReceipt[] {
  return letters.filter(
    (l) =>
      (filter.tenant === undefined || l.receipt.tenant === filter.tenant) &&
      (filter.id === undefined || l.id === filter.id),
  );
}

/** The dead-lettered receipts the filter keeps, oldest first. */
export async function listDeadReceipts(queue: ReceiptQueue, filter: ReceiptDlqFilter = {}): Promise<DeadReceipt[]> {
  return chosen(await queue.deadLetters(), filter);
}

/** Makes the chosen dead-lettered receipts due again; resolves to those moved. */
export async function replayDeadReceipts(
  queue: ReceiptQueue,
  filter: ReceiptDlqFilter = {},
  audit?: { log: AuditLog; subject: string },
): Promise<DeadReceipt[]> {
  const ids = (await listDeadReceipts(queue, filter)).map((l) => l.id);
  if (ids.length === 0) return [];
  const moved = await queue.replay(ids);
  for (const letter of moved) {
    audit?.log.record({
      tenant: letter.receipt.tenant,
      subject: audit.subject,
      action: 'receipts.replay',
      target: letter.id,
      outcome: 'ok',
    });
  }
  return moved;
}

/** One dead-lettered receipt as `list` prints it. */
export function receiptRow(l: DeadReceipt): string {
  const r = l.receipt;
  return [
    l.id,
    `tenant=${JSON.stringify(r.tenant)}`,
    `delivery=${r.source}/${r.eventId}`,
    `session=${r.sessionId}`,
    `step=${r.stepId}`,
    `attempts=${l.attempts}`,
    `error=${JSON.stringify(l.error)}`,
    `at=${new Date(l.at).toISOString()}`,
  ].join('  ');
}

/** Runs `list` or `replay` on the receipt queue of `connection`. */
export async function runReceiptDlq(
  command: 'list' | 'replay',
  connection: ReceiptDlqConnection,
  filter: ReceiptDlqFilter,
  out: { write(text: string): void },
  audit?: { log: AuditLog; subject: string },
): Promise<void> {
  const redis = connectRedis(connection);
  if (redis === undefined) throw new Error('no Redis configured');
  try {
    const queue = new RedisReceiptQueue(redis, { prefix: connection.prefix });
    if (command === 'list') {
      const letters = await listDeadReceipts(queue, filter);
      for (const l of letters) out.write(`${receiptRow(l)}\n`);
      out.write(`${letters.length} dead-lettered receipt(s)\n`);
      return;
    }
    const moved = await replayDeadReceipts(queue, filter, audit);
    for (const l of moved) out.write(`replayed ${receiptRow(l)}\n`);
    out.write(`${moved.length} receipt(s) replayed\n`);
  } finally {
    redis.disconnect();
  }
}
