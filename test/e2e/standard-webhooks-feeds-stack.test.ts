/**
 * The Standard Webhooks feeds on the real stack: the feed routes publish to
 * Kafka (under a fresh KAFKA_TOPIC_PREFIX) with their delivery ledger on
 * Redis; step-context consumes into its Redis batch store; a subscribed
 * session's next step gets each update exactly once, as a hook notice that
 * quotes the ticket text as untrusted data. incident.io deliveries (the
 * tenant rotating its secret: one signed with each), a ServiceNow record with
 * a repeat and a stale version, and a generic delivery signed with Standard
 * Webhooks; every delivery signed by the `standardwebhooks` package.
 */
import { randomUUID } from 'node:crypto';
import { DEFAULT_TENANT, TOPICS } from '@ctxflow/contracts';
import { feedRoutes, RedisDeliveryLedger } from '@ctxflow/feeds';
import { createServer } from '@ctxflow/service-kit';
import { FeedStepContext, RedisFeedStreams, StepContextService } from '@ctxflow/step-context';
import { RedisSubscriptionStore } from '@ctxflow/subscriptions';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { deleteKeys, uniquePrefix } from '../../services/step-context/test/helpers.ts';
import { fixture, standardHeaders } from '../../shared/feeds/test/helpers.ts';
import { createHarness } from '../support/harness.ts';
import { requireRedis } from '../support/services.ts';
import { prefixedBus } from '../support/stack.ts';

const tag = randomUUID().slice(0, 8);
/** prefixedBus's topic prefix. */
const prefix = `ctxflow-test-desks-${tag}.`;
const topic = `${prefix}${TOPICS.ticketUpdates}`;
const OLD = 'whsec_ZGVza3Mtb2xkLXNlY3JldC1vZi1pbmNpZGVudGlv';
const NEW = 'whsec_ZGVza3MtbmV3LXNlY3JldC1vZi1pbmNpZGVudGlv';
const SERVICENOW = 'whsec_ZGVza3Mtc2VydmljZW5vdy1zZWNyZXQ=';
const GENERIC = 'desks-generic-secret';
const cleanups: (() => Promise<unknown>)[] = [];

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

describe('Standard Webhooks feeds on Kafka and Redis', () => {
  it('incident.io, ServiceNow and generic deliveries reach the subscribed session once each; stale and ignored ones never', async () => {
    const redis = new Redis(requireRedis(), { maxRetriesPerRequest: 2 });
    const keyPrefix = uniquePrefix();
    cleanups.push(async () => {
      await deleteKeys(redis, keyPrefix);
      await redis.quit();
    });
    const { bus, close } = await prefixedBus('desks', tag, [TOPICS.ticketUpdates]);
    cleanups.push(close);

    const feeds = createServer({});
    await feeds.register(feedRoutes, {
      publisher: bus.publisher,
      ledger: new RedisDeliveryLedger({ redis, prefix: keyPrefix }),
      secrets: {
        incidentio: [
          { tenant: DEFAULT_TENANT, secret: OLD },
          { tenant: DEFAULT_TENANT, secret: NEW },
        ],
        servicenow: SERVICENOW,
        generic: GENERIC,
      },
    });
    cleanups.push(() => feeds.close());

    const subscriptions = new RedisSubscriptionStore({ redis, prefix: keyPrefix });
    const feedStreams = new RedisFeedStreams({ redis, prefix: keyPrefix });
    const service = new StepContextService({
      subscriber: bus.subscriber,
      feedStreams,
      subscriptions,
      groupId: `ctxflow-test-desks-step-context-${tag}`,
    });
    await service.start();
    cleanups.push(() => service.stop());
    const harness = await createHarness({
      engine: { stepContextFor: () => new FeedStepContext({ feedStreams, subscriptions }) },
    });
    const session = (await harness.call('POST', '/sessions', {})).body.sessionId as string;
    for (const [source, ticket] of [
      ['incidentio', 'INC-123'],
      ['servicenow', 'INC0000001'],
      ['generic', 'OPS-42'],
    ] as const) {
      await subscriptions.subscribe(DEFAULT_TENANT, session, { source, ticket });
    }

    const post = async (source: string, body: Buffer | string, id: string, secret: string) => {
      const res = await feeds.inject({
        method: 'POST',
        url: `/feeds/${source}`,
        headers: standardHeaders(body, id, secret, Math.floor(Date.now() / 1000)),
        payload: body,
      });
      expect(res.statusCode, res.body).toBe(202);
      return res.json();
    };
    const record = JSON.parse(fixture('servicenow-incident-commented.json').toString());
    const stale = JSON.stringify({
      ...record,
      sys_mod_count: '6',
      comments: 'OLD NEWS from version 6',
      work_notes: '',
    });

    const answers = [
      await post('incidentio', fixture('incidentio-incident-created.json'), `msg-created-${tag}`, OLD),
      await post('incidentio', fixture('incidentio-incident-created.json'), `msg-created-${tag}`, NEW),
      await post('incidentio', fixture('incidentio-incident-status-updated.json'), `msg-status-${tag}`, NEW),
      await post('incidentio', fixture('incidentio-follow-up-updated.json'), `msg-follow-${tag}`, OLD),
      await post('servicenow', fixture('servicenow-incident-commented.json'), `rec-${tag}.7`, SERVICENOW),
      await post('servicenow', fixture('servicenow-incident-commented.json'), `rec-${tag}.7`, SERVICENOW),
      await post('servicenow', stale, `rec-${tag}.6`, SERVICENOW),
      await post('generic', fixture('generic-update.json'), `msg-generic-${tag}`, GENERIC),
    ];
    expect(answers.map((a) => (a.ignored ? 'ignored' : a.duplicate ? 'duplicate' : 'published'))).toEqual([
      'published',
      'duplicate',
      'published',
      'ignored',
      'published',
      'duplicate',
      'published',
      'published',
    ]);

    // Five records on the topic (offsets 0 to 4); wait until step-context stored the last one's position.
    for (let i = 0; i < 600; i++) {
      const at = await feedStreams.resumeFrom(topic, 0);
      if (at !== undefined && BigInt(at) >= 5n) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await feedStreams.resumeFrom(topic, 0)).toBe('5');

    const step = (await harness.call('POST', `/sessions/${session}/steps`, {})).body;
    const notices: string[] = step.rows.map((r: { content: string }) => r.content);
    const of = (source: string) => notices.filter((n) => n.startsWith(`Ticket update from ${source} (untrusted:`));
    expect([of('incidentio').length, of('servicenow').length, of('generic').length, notices.length]).toEqual([
      1, 1, 1, 3,
    ]);
    const [incident] = of('incidentio') as [string];
    const [servicenow] = of('servicenow') as [string];
    // Coalesced per ticket: both incident updates in one notice, each once, the status change folded in.
    expect(incident).toContain('ticket: "INC-123"');
    expect(incident).toContain('updates (2):');
    expect(incident.split('Incident INC-123 created: Our database is sad').length - 1).toBe(1);
    expect(incident.split('Incident INC-123 status changed:').length - 1).toBe(1);
    expect(incident).toContain('- "status": "Triage" -> "Fixing"');
    expect(incident).not.toContain('Call the fire brigade');
    // The stale version 6 arrived after version 7: dropped.
    expect(servicenow).toContain('ticket: "INC0000001"');
    expect(servicenow).toContain('updates (1):');
    expect(servicenow).toContain('(version 7)');
    expect(servicenow).not.toContain('OLD NEWS');
    expect(of('generic')[0]).toContain('ticket: "OPS-42"');
    // Nothing more on the next step.
    expect((await harness.call('POST', `/sessions/${session}/steps`, {})).body.rows).toEqual([]);
  }, 120_000);
});
