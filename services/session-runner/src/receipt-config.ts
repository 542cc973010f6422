import { readFileSync } from 'node:fs';
import { blank, Secret } from '@ctxflow/service-kit';
import { Webhook } from 'standardwebhooks';
import { z } from 'zod';

/** The receipt webhook's settings, when CTXFLOW_RECEIPT_URL is set. */
export interface ReceiptWebhookConfig {
  url: string;
  /** The `whsec_...` signing secret; never logged. */
  secret: Secret;
  /** Calls per receipt before it goes to the dead-letter path. */
  maxAttempts: number;
  /** One call's limit, ms. */
  timeoutMs: number;
}

/**
 * The receipt webhook's variables, spread into the runner's and the embedded
 * app's schemas; {@link receiptWebhookOf} reads them in the transform.
 */
export const receiptWebhookVars = () => ({
  /** Where receipts are POSTed, signed with Standard Webhooks; absent: no receipt webhook. */
  CTXFLOW_RECEIPT_URL: blank(z.url({ protocol: /^https?$/ }).optional()),
  /** The signing secret (`whsec_` and base64), or a file holding it (a mounted secret). */
  CTXFLOW_RECEIPT_SECRET: blank(z.string().optional()),
  CTXFLOW_RECEIPT_SECRET_FILE: blank(z.string().optional()),
  CTXFLOW_RECEIPT_MAX_ATTEMPTS: blank(z.coerce.number().int().min(1).max(100).default(12)),
  CTXFLOW_RECEIPT_TIMEOUT_MS: blank(z.coerce.number().int().min(100).max(120_000).default(10_000)),
});

type ReceiptEnv = z.output<z.ZodObject<ReturnType<typeof receiptWebhookVars>>>;

function problem(ctx: z.RefinementCtx, variable: string, message: string): undefined {
  ctx.addIssue({ code: 'custom', path: [variable], message });
  return undefined;
}

/** The secret's text (a file's without one trailing newline), or undefined after naming the problem. */
function secretText(env: ReceiptEnv, ctx: z.RefinementCtx): [string, string] | undefined {
  if (env.CTXFLOW_RECEIPT_SECRET !== undefined && env.CTXFLOW_RECEIPT_SECRET_FILE !== undefined) {
    return problem(ctx, 'CTXFLOW_RECEIPT_SECRET_FILE', 'set either CTXFLOW_RECEIPT_SECRET or this, not both');
  }
  if (env.CTXFLOW_RECEIPT_SECRET !== undefined) return ['CTXFLOW_RECEIPT_SECRET', env.CTXFLOW_RECEIPT_SECRET];
  const path = env.CTXFLOW_RECEIPT_SECRET_FILE;
  if (path === undefined) return undefined;
  try {
    return ['CTXFLOW_RECEIPT_SECRET_FILE', readFileSync(path, 'utf8').replace(/\r?\n$/, '')];
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    return problem(ctx, 'CTXFLOW_RECEIPT_SECRET_FILE', `cannot read ${path} (${code})`);
  }
}

/**
 * The receipt webhook of a parsed environment, for a schema's transform:
 * undefined without CTXFLOW_RECEIPT_URL. A URL without a secret, a secret
 * without a URL, or a secret that is not `whsec_` and base64 is a problem
 * naming its variable (the service exits 2); the secret is never echoed.
 */
export function receiptWebhookOf(env: ReceiptEnv, ctx: z.RefinementCtx): ReceiptWebhookConfig | undefined {
  const secret = secretText(env, ctx);
  if (env.CTXFLOW_RECEIPT_URL === undefined) {
    if (secret !== undefined) problem(ctx, secret[0], 'set without CTXFLOW_RECEIPT_URL (nothing would be signed)');
    return undefined;
  }
  if (secret === undefined) {
    const given = env.CTXFLOW_RECEIPT_SECRET_FILE !== undefined;
    return given
      ? undefined
      : problem(ctx, 'CTXFLOW_RECEIPT_SECRET_FILE', 'required with CTXFLOW_RECEIPT_URL (or CTXFLOW_RECEIPT_SECRET)');
  }
  const [variable, text] = secret;
  if (!/^whsec_[A-Za-z0-9+/]+={0,2}$/.test(text)) {
    return problem(ctx, variable, 'expected a Standard Webhooks secret: whsec_ then base64');
  }
  try {
    new Webhook(text);
  } catch {
    return problem(ctx, variable, 'expected a Standard Webhooks secret: whsec_ then base64');
  }
  return {
    url: env.CTXFLOW_RECEIPT_URL,
    secret: new Secret(text),
    maxAttempts: env.CTXFLOW_RECEIPT_MAX_ATTEMPTS,
    timeoutMs: env.CTXFLOW_RECEIPT_TIMEOUT_MS,
  };
}
