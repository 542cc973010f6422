/**
 * The feeds' rows of the HTTP bench (S4, S4b, S4-pagerduty): one entry per
 * feed, with its deliveries, signed before the run as each provider signs them.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { LoadRequest } from './load.ts';

export const FEED_SECRET = 'bench-feed-secret';
export const NOTICE =
  'Ticket PROJ-4312 moved to In Progress by alice@example.com: "Checkout fails for carts over 50 items" (priority P2).';
const JSON_HEADERS = { 'content-type': 'application/json' };

/** A feed's requests for one run; `used` counts them where the pool is bounded (signed per delivery). */
export interface Deliveries {
  next: () => LoadRequest;
  used?: () => number;
}

/** Signed generic-feed deliveries, each with a fresh eventId, signed before the run. */
function signedDeliveries(count: number): Deliveries {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const pool: { headers: Record<string, string>; body: string }[] = [];
  for (let i = 0; i < count; i++) {
    const body = JSON.stringify({
      eventId: randomUUID(),
      ticket: `PROJ-${i % 500}`,
      summary: NOTICE,
      kind: 'updated',
    });
    const signature = createHmac('sha256', FEED_SECRET).update(`${timestamp}.${body}`).digest('hex');
    pool.push({
      headers: { ...JSON_HEADERS, 'x-ctxflow-timestamp': timestamp, 'x-ctxflow-signature': `sha256=${signature}` },
      body,
    });
  }
  let n = 0;
  return {
    next: () => {
      const delivery = pool[n % pool.length]!;
      n += 1;
      return { path: '/feeds/generic', ...delivery };
    },
    used: () => n,
  };
}

/**
 * incident.io deliveries (incident updated, a fresh `webhook-id` each), signed
 * with Standard Webhooks before the run. The bench secret is raw (no `whsec_`):
 * the key is its UTF-8 bytes.
 */
function standardDeliveries(count: number): Deliveries {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const pool: { headers: Record<string, string>; body: string }[] = [];
  for (let i = 0; i < count; i++) {
    const id = `msg_${randomUUID()}`;
    const body = JSON.stringify({
      event_type: 'public_incident.incident_updated_v2',
      'public_incident.incident_updated_v2': {
        id: '01FDAG4SAP5TYPT98WGR2N7W91',
        reference: `INC-${i % 500}`,
        name: 'Checkout fails for carts over 50 items',
        summary: NOTICE,
        permalink: `https://app.incident.io/incidents/${i % 500}`,
        incident_status: { id: '01FCNDV6P870EA6S7TK1DSYD5H', name: 'Fixing', category: 'active' },
        severity: { id: '01FCNDV6P870EA6S7TK1DSYDG0', name: 'Major', rank: 2 },
        updated_at: '2026-05-01T09:30:00.000Z',
        visibility: 'public',
      },
    });
    const signature = createHmac('sha256', FEED_SECRET).update(`${id}.${timestamp}.${body}`).digest('base64');
    pool.push({
      headers: {
        ...JSON_HEADERS,
        'webhook-id': id,
        'webhook-timestamp': timestamp,
        'webhook-signature': `v1,${signature}`,
      },
      body,
    });
  }
  let n = 0;
  return {
    next: () => {
      const delivery = pool[n % pool.length]!;
      n += 1;
      return { path: '/feeds/incidentio', ...delivery };
    },
    used: () => n,
  };
}

/** PagerDuty's documented `incident.priority_updated` payload, the body of the PagerDuty feed's deliveries. */
const PAGERDUTY_EXAMPLE = readFileSync(
  new URL('../../shared/feeds/test/fixtures/pagerduty-incident-priority-updated.json', import.meta.url),
  'utf8',
);

/**
 * PagerDuty deliveries: the documented payload for 500 incidents, each signed
 * before the run (the signature covers the body only); each request a new
 * X-Webhook-Id, so each is a new delivery (the pool never runs out).
 */
function pagerdutyDeliveries(): Deliveries {
  const run = randomUUID();
  const pool = Array.from({ length: 500 }, (_, i) => {
    const body = PAGERDUTY_EXAMPLE.replaceAll('PGR0VU2', `PBENCH${i}`);
    const signature = createHmac('sha256', FEED_SECRET).update(body).digest('hex');
    return { body, signature: `v1=${signature}` };
  });
  let n = 0;
  return {
    next: () => {
      const delivery = pool[n % pool.length]!;
      n += 1;
      return {
        path: '/feeds/pagerduty',
        headers: { ...JSON_HEADERS, 'x-pagerduty-signature': delivery.signature, 'x-webhook-id': `${run}-${n}` },
        body: delivery.body,
      };
    },
  };
}

/** One feed's bench row (S4...): its deliveries against the hello route fed the same bodies. */
export interface FeedScenario {
  id: string;
  title: string;
  path: string;
  /** What the hello route's bodies are, in its variant's name: `hello (<body> body)`. */
  body: string;
  /** Deliveries for one run; `count` bounds a pool signed per delivery. */
  deliveries(count: number): Deliveries;
  note: string;
}

export const FEED_SCENARIOS: FeedScenario[] = [
  {
    id: 'S4',
    title: 'Signed webhook ingest, POST /feeds/generic',
    path: '/feeds/generic',
    body: 'webhook',
    deliveries: signedDeliveries,
    note: 'fresh eventId per request, signed before the run',
  },
  {
    id: 'S4b',
    title: 'Standard Webhooks ingest, POST /feeds/incidentio',
    path: '/feeds/incidentio',
    body: 'incident.io',
    deliveries: standardDeliveries,
    note: 'incident updated events, fresh webhook-id per request, signed before the run',
  },
  {
    id: 'S4-pagerduty',
    title: 'Signed webhook ingest, POST /feeds/pagerduty',
    path: '/feeds/pagerduty',
    body: 'pagerduty',
    deliveries: pagerdutyDeliveries,
    note: "PagerDuty's documented incident.priority_updated payload (2.3 KB) for 500 incidents, signed before the run; a new X-Webhook-Id per request",
  },
];
