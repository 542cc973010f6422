/**
 * The receipt webhook's settings: a URL needs a Standard Webhooks secret (a variable or a
 * file); every refusal names its variable, never echoes the secret, and the service exits 2.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadEmbeddedConfig } from '@ctxflow/embedded';
import { loadRunnerConfig } from '@ctxflow/session-runner';
import { afterAll, describe, expect, it } from 'vitest';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const URL = 'https://desk.example.com/ctxflow/receipts';
const dir = mkdtempSync(join(tmpdir(), 'ctxflow-receipts-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function messageOf(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error('accepted');
}

describe('receipt webhook settings', () => {
  it('absent: no receipt webhook', () => {
    expect(loadRunnerConfig({}).receiptWebhook).toBeUndefined();
    expect(loadEmbeddedConfig({}).receiptWebhook).toBeUndefined();
  });

  it('a URL with a secret file (one trailing newline dropped) gives the webhook; the secret never serializes', () => {
    const file = join(dir, 'secret');
    writeFileSync(file, `${SECRET}\n`);
    const { receiptWebhook } = loadRunnerConfig({ CTXFLOW_RECEIPT_URL: URL, CTXFLOW_RECEIPT_SECRET_FILE: file });
    expect(receiptWebhook?.url).toBe(URL);
    expect(receiptWebhook?.secret.reveal()).toBe(SECRET);
    expect({ maxAttempts: receiptWebhook?.maxAttempts, timeoutMs: receiptWebhook?.timeoutMs }).toEqual({
      maxAttempts: 12,
      timeoutMs: 10_000,
    });
    expect(JSON.stringify(receiptWebhook)).not.toContain(SECRET);
    const embedded = loadEmbeddedConfig({
      CTXFLOW_RECEIPT_URL: URL,
      CTXFLOW_RECEIPT_SECRET: SECRET,
      CTXFLOW_RECEIPT_MAX_ATTEMPTS: '3',
    });
    expect(embedded.receiptWebhook?.maxAttempts).toBe(3);
  });

  it('refuses a URL without a secret, a secret without a URL, both secrets, a bad secret, a bad URL', () => {
    expect(messageOf(() => loadRunnerConfig({ CTXFLOW_RECEIPT_URL: URL }))).toContain(
      'CTXFLOW_RECEIPT_SECRET_FILE: required with CTXFLOW_RECEIPT_URL',
    );
    expect(messageOf(() => loadEmbeddedConfig({ CTXFLOW_RECEIPT_URL: URL }))).toContain(
      'CTXFLOW_RECEIPT_SECRET_FILE: required with CTXFLOW_RECEIPT_URL',
    );
    expect(messageOf(() => loadRunnerConfig({ CTXFLOW_RECEIPT_SECRET: SECRET }))).toContain(
      'CTXFLOW_RECEIPT_SECRET: set without CTXFLOW_RECEIPT_URL',
    );
    const file = join(dir, 'both');
    writeFileSync(file, SECRET);
    expect(
      messageOf(() =>
        loadRunnerConfig({
          CTXFLOW_RECEIPT_URL: URL,
          CTXFLOW_RECEIPT_SECRET: SECRET,
          CTXFLOW_RECEIPT_SECRET_FILE: file,
        }),
      ),
    ).toContain('CTXFLOW_RECEIPT_SECRET_FILE: set either CTXFLOW_RECEIPT_SECRET or this, not both');
    const bad = messageOf(() =>
      loadRunnerConfig({ CTXFLOW_RECEIPT_URL: URL, CTXFLOW_RECEIPT_SECRET: 'hunter2-secret' }),
    );
    expect(bad).toContain('CTXFLOW_RECEIPT_SECRET: expected a Standard Webhooks secret');
    expect(bad).not.toContain('hunter2');
    expect(
      messageOf(() =>
        loadRunnerConfig({ CTXFLOW_RECEIPT_URL: URL, CTXFLOW_RECEIPT_SECRET_FILE: join(dir, 'missing') }),
      ),
    ).toContain('CTXFLOW_RECEIPT_SECRET_FILE: cannot read');
    expect(
      messageOf(() => loadRunnerConfig({ CTXFLOW_RECEIPT_URL: 'ftp://x', CTXFLOW_RECEIPT_SECRET: SECRET })),
    ).toContain('CTXFLOW_RECEIPT_URL');
  });

  it('the session-runner with a URL and no secret exits 2 naming the variable', () => {
    const run = spawnSync(process.execPath, ['services/session-runner/src/main.ts'], {
      env: { PATH: process.env.PATH ?? '', CTXFLOW_RECEIPT_URL: URL },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('CTXFLOW_RECEIPT_SECRET_FILE: required with CTXFLOW_RECEIPT_URL');
  });
});
