import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { OutgoingRecord, Publisher } from '@ctxflow/bus';
import { type BuiltinFeedSource, CtxflowError } from '@ctxflow/contracts';
import { type FeedRoutesDeps, feedRoutes, MemoryDeliveryLedger } from '@ctxflow/feeds';
import { createServer } from '@ctxflow/service-kit';
import type { FastifyBaseLogger } from 'fastify';
import { Webhook } from 'standardwebhooks';

/** Fixed "now" of the feed tests: 2024-05-01T09:31:00Z, in epoch milliseconds. */
export const NOW = Date.parse('2024-05-01T09:31:00Z');
export const RECEIVED_AT = new Date(NOW).toISOString();

export const SECRETS: Record<Exclude<BuiltinFeedSource, 'cloudevents'>, string> = {
  generic: 'generic-test-secret-9f1c',
  github: 'github-test-secret-27ab',
  incidentio: 'whsec_aW5jaWRlbnRpby10ZXN0LXNlY3JldC0zMmI5',
  jira: 'jira-test-secret-c04e',
  servicenow: 'whsec_c2VydmljZW5vdy10ZXN0LXNlY3JldC03MWQ0',
  zendesk: 'zendesk-test-secret-e6d3',
  pagerduty: 'pagerduty-test-secret-5a80',
  linear: 'linear-test-secret-b71d',
  gitlab: 'gitlab-test-token-3c94',
};

/** A Publisher that records what the bus acknowledged; `failing` makes it reject like a bus that is down. */
export class RecordingPublisher implements Publisher {
  readonly published: { topic: string; record: OutgoingRecord }[] = [];
  failing = false;
  /** When set, publish waits for this promise first (a slow bus). */
  gate: Promise<void> | undefined;
  /** Publish calls begun, finished or not. */
  calls = 0;

  async publish(topic: string, records: OutgoingRecord[]): Promise<void> {
    this.calls++;
    if (this.gate) await this.gate;
    if (this.failing) throw new CtxflowError('bus_unavailable', 'broker not reachable');
    for (const record of records) this.published.push({ topic, record });
  }

  async close(): Promise<void> {}
}

/** Resolves once `publisher` has begun `calls` publishes (a request reached the bus), else fails after 5 s. */
export async function publishing(publisher: RecordingPublisher, calls: number): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (publisher.calls < calls) {
    if (Date.now() > deadline) throw new Error(`${publisher.calls} of ${calls} publish calls after 5 s`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

export function fixture(name: string): Buffer {
  return readFileSync(new URL(`./fixtures/${name}`, import.meta.url));
}

export function hmacHex(secret: string, ...parts: (string | Buffer)[]): string {
  const mac = createHmac('sha256', secret);
  for (const part of parts) mac.update(part);
  return mac.digest('hex');
}

export function genericHeaders(body: Buffer | string, timestampS = Math.floor(NOW / 1000), secret = SECRETS.generic) {
  const ts = String(timestampS);
  return {
    'content-type': 'application/json',
    'x-ctxflow-timestamp': ts,
    'x-ctxflow-signature': `sha256=${hmacHex(secret, ts, '.', body)}`,
  };
}

export function githubHeaders(body: Buffer | string, event: string, delivery: string, secret = SECRETS.github) {
  return {
    'content-type': 'application/json',
    'x-github-event': event,
    'x-github-delivery': delivery,
    'x-hub-signature-256': `sha256=${hmacHex(secret, body)}`,
  };
}

export function jiraHeaders(body: Buffer | string, secret = SECRETS.jira) {
  return { 'content-type': 'application/json', 'x-hub-signature': `sha256=${hmacHex(secret, body)}` };
}

export function zendeskHeaders(
  body: Buffer | string,
  timestamp = new Date(NOW).toISOString(),
  secret = SECRETS.zendesk,
) {
  const signature = createHmac('sha256', secret).update(timestamp).update(body).digest('base64');
  return {
    'content-type': 'application/json',
    'x-zendesk-webhook-signature-timestamp': timestamp,
    'x-zendesk-webhook-signature': signature,
  };
}

/**
 * Standard Webhooks headers, signed by the `standardwebhooks` package (the
 * reference implementation, not the verifier's code). A `whsec_` secret is
 * base64 after the prefix; any other is taken raw (the package's `format: "raw"`).
 * Several secrets: one `v1,` signature each, space-separated (a sender mid-rotation).
 */
export function standardHeaders(
  body: Buffer | string,
  id: string,
  secrets: string | readonly string[],
  timestampS = Math.floor(NOW / 1000),
) {
  const signatures = [secrets].flat().map((secret) => {
    const webhook = secret.startsWith('whsec_') ? new Webhook(secret) : new Webhook(secret, { format: 'raw' });
    return webhook.sign(id, new Date(timestampS * 1000), body.toString('utf8'));
  });
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestampS),
    'webhook-signature': signatures.join(' '),
  };
}

/** PagerDuty's header: one `v1=` signature per secret (several while PagerDuty rotates the secret). */
export function pagerdutyHeaders(body: Buffer | string, webhookId?: string, secrets: string[] = [SECRETS.pagerduty]) {
  return {
    'content-type': 'application/json',
    'x-pagerduty-signature': secrets.map((secret) => `v1=${hmacHex(secret, body)}`).join(','),
    ...(webhookId === undefined ? {} : { 'x-webhook-id': webhookId }),
  };
}

/** A Linear body as sent at `atMs`: the fixture with its `webhookTimestamp` set (the rest byte for byte). */
export function linearBody(name: string, atMs = NOW): Buffer {
  const text = fixture(name).toString('utf8');
  const stamp = /"webhookTimestamp": \d+/;
  if (!stamp.test(text)) throw new Error(`${name}: no webhookTimestamp`);
  return Buffer.from(text.replace(stamp, `"webhookTimestamp": ${atMs}`));
}

export function linearHeaders(body: Buffer | string, delivery?: string, secret = SECRETS.linear) {
  return {
    'content-type': 'application/json; charset=utf-8',
    'linear-signature': hmacHex(secret, body),
    'linear-event': 'Issue',
    ...(delivery === undefined ? {} : { 'linear-delivery': delivery }),
  };
}

export function gitlabHeaders(event: string, idempotencyKey?: string, token = SECRETS.gitlab) {
  return {
    'content-type': 'application/json',
    'x-gitlab-event': event,
    'x-gitlab-token': token,
    'x-gitlab-event-uuid': '13792a34-cac6-4fda-95a8-c58e00a3954e',
    ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
  };
}

/** The feed routes on a server of their own (as the feed-ingestor serves them), at the tests' fixed "now". */
export async function feedApp(overrides: Partial<FeedRoutesDeps> & { logger?: FastifyBaseLogger } = {}) {
  const { logger, ...routes } = overrides;
  const publisher = new RecordingPublisher();
  const ledger = new MemoryDeliveryLedger({ clock: () => NOW });
  const app = createServer(logger ? { logger } : {});
  await app.register(feedRoutes, { publisher, ledger, secrets: SECRETS, clock: () => NOW, ...routes });
  return { app, publisher, ledger };
}
