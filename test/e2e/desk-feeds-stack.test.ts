/**
 * The PagerDuty, Linear and GitLab feeds on the real stack: the session-runner and
 * step-context as their own processes on Kafka and Redis, two tenants. Each vendor's
 * documented payload (shared/feeds/test/fixtures), signed as its vendor signs it, is sent
 * twice to the runner's port; the subscribed session of the tenant whose secret verified
 * it gets each update exactly once, as a hook notice; the other tenant's session, subscribed
 * to the same tickets, gets nothing.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fixture,
  gitlabHeaders,
  linearBody,
  linearHeaders,
  pagerdutyHeaders,
} from '../../shared/feeds/test/helpers.ts';
import { waitFor } from '../faults/processes.ts';
import { type Stack, startStack } from '../support/stack.ts';

const run = randomUUID().slice(0, 8);
const KEYS = { ta: 'desk-key-a', tb: 'desk-key-b' } as const;
type Tenant = keyof typeof KEYS;
const SECRETS = { pagerduty: `pd-${run}`, linear: `lin-${run}`, gitlab: `gl-${run}` } as const;

describe('PagerDuty, Linear and GitLab deliveries reach a subscribed session exactly once on Kafka and Redis', () => {
  let stack: Stack<Tenant>;
  let runnerUrl = '';

  beforeAll(async () => {
    stack = await startStack({
      name: 'desk-feeds',
      run,
      keys: KEYS,
      env: {
        // Tenant-scoped like every feed's secret: only tenant ta's deliveries verify.
        CTXFLOW_FEED_SECRET_PAGERDUTY: `ta:${SECRETS.pagerduty}`,
        CTXFLOW_FEED_SECRET_LINEAR: `ta:${SECRETS.linear}`,
        CTXFLOW_FEED_SECRET_GITLAB: `ta:${SECRETS.gitlab}`,
      },
    });
    runnerUrl = stack.runnerUrl;
  }, 120_000);

  afterAll(() => stack?.stop());

  const api = (tenant: Tenant, method: string, path: string, body?: object) => stack.api(tenant, method, path, body);

  const deliver = async (source: string, body: Buffer, headers: Record<string, string>) => {
    const response = await fetch(`${runnerUrl}/feeds/${source}`, { method: 'POST', headers, body });
    return { status: response.status, body: await response.json() };
  };

  it('each feed: published once, one notice row in the subscribed session, none in the other tenant', async () => {
    const ofA = (await api('ta', 'POST', '/sessions', {})).body.sessionId as string;
    const ofB = (await api('tb', 'POST', '/sessions', {})).body.sessionId as string;
    const subscriptions = [
      { source: 'pagerduty', ticket: 'PGR0VU2' },
      { source: 'linear', ticket: 'WEB-43' },
      { source: 'gitlab', ticket: 'gitlabhq/gitlab-test#23' },
    ];
    for (const subscription of subscriptions) {
      expect((await api('ta', 'POST', `/sessions/${ofA}/subscriptions`, subscription)).status).toBe(201);
      expect((await api('tb', 'POST', `/sessions/${ofB}/subscriptions`, subscription)).status).toBe(201);
    }

    const pagerduty = fixture('pagerduty-incident-priority-updated.json');
    const linear = linearBody('linear-issue-update.json', Date.now());
    const gitlab = fixture('gitlab-issue-hook.json');
    const sends = [
      {
        source: 'pagerduty',
        body: pagerduty,
        headers: pagerdutyHeaders(pagerduty, `pd-${run}`, [SECRETS.pagerduty]),
        id: `pagerduty:pd-${run}`,
      },
      {
        source: 'linear',
        body: linear,
        headers: linearHeaders(linear, `lin-${run}`, SECRETS.linear),
        id: `linear:lin-${run}`,
      },
      {
        source: 'gitlab',
        body: gitlab,
        headers: gitlabHeaders('Issue Hook', `gl-${run}`, SECRETS.gitlab),
        id: `gitlab:gl-${run}`,
      },
    ];
    for (const send of sends) {
      expect(await deliver(send.source, send.body, send.headers), send.source).toEqual({
        status: 202,
        body: { accepted: true, id: send.id },
      });
      // The vendor's retry of the same delivery: answered, not published again.
      expect(await deliver(send.source, send.body, send.headers), send.source).toEqual({
        status: 202,
        body: { accepted: true, id: send.id, duplicate: true },
      });
    }

    const markers = [
      'Ticket update from pagerduty',
      'Tenex Engineer changed the priority of incident #2 PGR0VU2',
      'Ticket update from linear',
      'Jane Doe updated WEB-43: Checkout fails for EU cards',
      'Ticket update from gitlab',
      'root opened issue gitlabhq/gitlab-test#23',
    ];
    const rows: { role: string; kind: string; source: string; content: string }[] = [];
    await waitFor(
      'the three notices in the subscribed session',
      async () => {
        const step = await api('ta', 'POST', `/sessions/${ofA}/steps`, {});
        expect(step.status).toBe(200);
        rows.push(...step.body.rows);
        const text = rows.map((row) => row.content).join('\n');
        return markers.every((marker) => text.includes(marker));
      },
      30_000,
      200,
    );
    // Nothing more arrives: one more step commits no row.
    expect((await api('ta', 'POST', `/sessions/${ofA}/steps`, {})).body.rows).toEqual([]);
    for (const row of rows) expect(row).toMatchObject({ role: 'context', kind: 'notice', source: 'hook' });
    const text = rows.map((row) => row.content).join('\n');
    for (const marker of markers) expect(text.split(marker).length - 1, marker).toBe(1);

    // Tenant B's session, subscribed to the same tickets, never sees tenant A's deliveries.
    const stepB = await api('tb', 'POST', `/sessions/${ofB}/steps`, {});
    expect(stepB.body.rows).toEqual([]);
    expect(JSON.stringify(stepB.body)).not.toContain('PGR0VU2');
  });
});
