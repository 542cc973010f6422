import { createHmac } from 'node:crypto';
import { buildEmbeddedApp, type EmbeddedApp, loadEmbeddedConfig } from '@ctxflow/embedded';
import { loadFeedConfig } from '@ctxflow/feed-ingestor';
import { feedSecretVar, feedSourceOfVar } from '@ctxflow/feeds';
import { ConfigError } from '@ctxflow/service-kit';
import { loadRunnerConfig } from '@ctxflow/session-runner';
import { afterEach, describe, expect, it } from 'vitest';
import { feedApp, genericHeaders, RECEIVED_AT, SECRETS } from '../../../shared/feeds/test/helpers.ts';

const TRACKER_SECRET = 'my-tracker-secret-5b0e';

describe('configured feed sources', () => {
  it('CTXFLOW_FEED_SECRET_<NAME> configures source <name> (lower case, _ as -); the built-in ones stay', () => {
    const config = loadFeedConfig({
      CTXFLOW_FEED_SECRET_MY_TRACKER: TRACKER_SECRET,
      CTXFLOW_FEED_SECRET_OPS2: 'ops',
      CTXFLOW_FEED_SECRET_CLOUDEVENTS: 'ce',
      CTXFLOW_FEED_SECRET_GITHUB: 'gh',
      CTXFLOW_FEED_SECRET_EMPTY: '',
    });
    expect(config.secrets).toEqual({
      cloudevents: [{ tenant: 'default', secret: 'ce' }],
      github: [{ tenant: 'default', secret: 'gh' }],
      'my-tracker': [{ tenant: 'default', secret: TRACKER_SECRET }],
      ops2: [{ tenant: 'default', secret: 'ops' }],
    });
    // The embedded service and the session-runner (its feed routes) read them the same way.
    expect(loadEmbeddedConfig({ CTXFLOW_FEED_SECRET_MY_TRACKER: TRACKER_SECRET }).secrets).toEqual({
      'my-tracker': [{ tenant: 'default', secret: TRACKER_SECRET }],
    });
    expect(loadRunnerConfig({ CTXFLOW_FEED_SECRET_MY_TRACKER: TRACKER_SECRET }).secrets).toEqual({
      'my-tracker': [{ tenant: 'default', secret: TRACKER_SECRET }],
    });
    expect(feedSecretVar('my-tracker')).toBe('CTXFLOW_FEED_SECRET_MY_TRACKER');
    expect(feedSourceOfVar('CTXFLOW_FEED_SECRET_MY_TRACKER')).toBe('my-tracker');
  });

  it('a variable whose name is no source name stops the start, naming it and never its value', () => {
    let error: unknown;
    try {
      loadFeedConfig({
        'CTXFLOW_FEED_SECRET_MY.TRACKER': 'value-1',
        [`CTXFLOW_FEED_SECRET_${'A'.repeat(33)}`]: 'value-2',
        CTXFLOW_FEED_SECRET_lower: 'value-3',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems.map((p) => p.split(':')[0]).sort()).toEqual(
      ['CTXFLOW_FEED_SECRET_MY.TRACKER', `CTXFLOW_FEED_SECRET_${'A'.repeat(33)}`, 'CTXFLOW_FEED_SECRET_lower'].sort(),
    );
    for (const problem of problems) expect(problem).toMatch(/not a feed source name/);
    expect(problems.join('\n')).not.toMatch(/value-\d/);
  });

  it('a configured source takes the generic body at /feeds/<name>, signed like generic, and publishes as <name>', async () => {
    const { app, publisher } = await feedApp({ secrets: { ...SECRETS, 'my-tracker': TRACKER_SECRET } });
    const body = JSON.stringify({ eventId: 'E-1', ticket: 'T-9', summary: 'escalated', version: 2 });
    const post = (secret: string) =>
      app.inject({
        method: 'POST',
        url: '/feeds/my-tracker',
        headers: genericHeaders(body, undefined, secret),
        payload: body,
      });
    const accepted = await post(TRACKER_SECRET);
    expect(accepted.statusCode).toBe(202);
    expect(accepted.json()).toEqual({ accepted: true, id: 'my-tracker:E-1' });
    expect((await post(TRACKER_SECRET)).json().duplicate).toBe(true);
    // The generic feed's secret does not sign for another source.
    expect((await post(SECRETS.generic)).statusCode).toBe(401);
    expect(publisher.published).toHaveLength(1);
    expect(publisher.published[0]!.record.key).toBe('my-tracker:T-9');
    expect(JSON.parse(publisher.published[0]!.record.value)).toEqual({
      id: 'my-tracker:E-1',
      tenant: 'default',
      source: 'my-tracker',
      ticket: 'T-9',
      eventId: 'E-1',
      kind: 'updated',
      summary: 'escalated',
      version: 2,
      occurredAt: RECEIVED_AT,
      receivedAt: RECEIVED_AT,
    });
    // A name nobody configured has no route.
    const unknown = await app.inject({
      method: 'POST',
      url: '/feeds/other',
      headers: genericHeaders(body),
      payload: body,
    });
    expect(unknown.statusCode).toBe(404);
    expect(publisher.published).toHaveLength(1);
  });

  it('a source name that breaks the rule is refused when the routes are built', async () => {
    await expect(feedApp({ secrets: { My_Tracker: 'x' } })).rejects.toThrow(/feed source "My_Tracker"/);
  });
});

describe('a configured source end to end', () => {
  let embedded: EmbeddedApp | undefined;
  afterEach(async () => {
    await embedded?.close();
    embedded = undefined;
  });

  it('a signed delivery to /feeds/my-tracker reaches the session subscribed to source my-tracker, once', async () => {
    embedded = await buildEmbeddedApp({ config: { apiKeys: new Map(), secrets: { 'my-tracker': TRACKER_SECRET } } });
    const app = embedded.app;
    const call = async (method: 'POST', url: string, body: object) => {
      const res = await app.inject({ method, url, payload: body });
      return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
    };
    const session = (await call('POST', '/sessions', {})).body.sessionId;
    const other = (await call('POST', '/sessions', {})).body.sessionId;
    expect(
      (await call('POST', `/sessions/${session}/subscriptions`, { source: 'my-tracker', ticket: '*' })).status,
    ).toBe(201);
    // The same ticket key under the generic source is another ticket.
    expect((await call('POST', `/sessions/${other}/subscriptions`, { source: 'generic', ticket: 'T-9' })).status).toBe(
      201,
    );
    const raw = JSON.stringify({ eventId: 'E-1', ticket: 'T-9', summary: 'Escalated by the on-call engineer' });
    const ts = String(Math.floor(Date.now() / 1000));
    const signature = createHmac('sha256', TRACKER_SECRET).update(`${ts}.${raw}`).digest('hex');
    const headers = {
      'content-type': 'application/json',
      'x-ctxflow-timestamp': ts,
      'x-ctxflow-signature': `sha256=${signature}`,
    };
    for (let i = 0; i < 2; i++) {
      expect((await app.inject({ method: 'POST', url: '/feeds/my-tracker', headers, payload: raw })).statusCode).toBe(
        202,
      );
    }
    let rows: { content: string }[] = [];
    for (let i = 0; i < 200 && rows.length === 0; i++) {
      rows = (await call('POST', `/sessions/${session}/steps`, {})).body.rows;
      if (rows.length === 0) await new Promise((r) => setTimeout(r, 10));
    }
    expect(rows).toHaveLength(1);
    expect(rows[0]!.content).toContain('Escalated by the on-call engineer');
    expect((await call('POST', `/sessions/${session}/steps`, {})).body.rows).toEqual([]);
    expect((await call('POST', `/sessions/${other}/steps`, {})).body.rows).toEqual([]);
  });
});
