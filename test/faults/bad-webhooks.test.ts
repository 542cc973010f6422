/**
 * Fault: a battery of bad webhooks against a running feed-ingestor on Kafka
 * and Redis. Tampered bodies, wrong-length, foreign and missing signatures,
 * stale, future and malformed timestamps, truncated and schema-invalid JSON,
 * an empty and an oversize body, wrong and missing content types, a feed
 * that is not configured: each is refused with its code, and a consumer on
 * TOPICS.ticketUpdates proves that nothing of them was published. Valid
 * deliveries interleaved with the battery (and replays of them) are
 * published exactly once, in order per ticket.
 */
import { randomUUID } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { requireKafka, requireRedis } from '../support/services.ts';
import { ExactlyOnce } from './exactly-once.ts';
import {
  type FeedAnswer,
  genericBody,
  genericSignature,
  nowS,
  postFeed,
  postSigned,
  TicketUpdatesWatch,
} from './feed-load.ts';
import { cleanupsAfterAll } from './load-rig.ts';
import {
  deletePrefix,
  ENTRIES,
  freePort,
  ServiceProcess,
  serviceEnv,
  sleep,
  startGroupsAtEnd,
  waitFor,
} from './processes.ts';

const SECRET = 'fault-battery-secret';
const MAX_BYTES = 4_096;
const ROUNDS = 3;
const TICKETS = 3;

type BadCase = {
  name: string;
  status: number;
  code: string;
  send: (feedUrl: string, body: string) => Promise<FeedAnswer>;
};

const json = { 'content-type': 'application/json' };

const BATTERY: BadCase[] = [
  {
    name: 'tampered body (one byte changed after signing)',
    status: 401,
    code: 'unauthorized',
    send: (url, body) =>
      postFeed(url, body.replace('update', 'updatE'), { ...json, ...genericSignature(SECRET, body, nowS()) }),
  },
  {
    name: 'signature of the wrong length',
    status: 401,
    code: 'unauthorized',
    send: (url, body) =>
      postFeed(url, body, { ...json, 'x-ctxflow-timestamp': String(nowS()), 'x-ctxflow-signature': 'sha256=abcd' }),
  },
  {
    name: 'signature one hex digit short',
    status: 401,
    code: 'unauthorized',
    send: (url, body) => {
      const headers = genericSignature(SECRET, body, nowS());
      headers['x-ctxflow-signature'] = headers['x-ctxflow-signature']!.slice(0, -1);
      return postFeed(url, body, { ...json, ...headers });
    },
  },
  {
    name: 'signed with another secret',
    status: 401,
    code: 'unauthorized',
    send: (url, body) => postFeed(url, body, { ...json, ...genericSignature('not-the-secret', body, nowS()) }),
  },
  {
    name: 'missing signature',
    status: 401,
    code: 'unauthorized',
    send: (url, body) => postFeed(url, body, { ...json, 'x-ctxflow-timestamp': String(nowS()) }),
  },
  {
    name: 'missing timestamp',
    status: 401,
    code: 'unauthorized',
    send: (url, body) => {
      const { 'x-ctxflow-signature': signature } = genericSignature(SECRET, body, nowS());
      return postFeed(url, body, { ...json, 'x-ctxflow-signature': signature! });
    },
  },
  {
    name: 'stale timestamp (301 s old, correctly signed)',
    status: 401,
    code: 'unauthorized',
    send: (url, body) => postFeed(url, body, { ...json, ...genericSignature(SECRET, body, nowS() - 301) }),
  },
  {
    name: 'future timestamp (301 s ahead, correctly signed)',
    status: 401,
    code: 'unauthorized',
    send: (url, body) => postFeed(url, body, { ...json, ...genericSignature(SECRET, body, nowS() + 301) }),
  },
  {
    name: 'timestamp in milliseconds',
    status: 401,
    code: 'unauthorized',
    send: (url, body) => postFeed(url, body, { ...json, ...genericSignature(SECRET, body, Date.now()) }),
  },
  {
    name: 'truncated JSON (correctly signed)',
    status: 400,
    code: 'validation_error',
    send: (url, body) => postSignedRaw(url, body.slice(0, body.length - 7)),
  },
  {
    name: 'schema-invalid JSON (unknown field, correctly signed)',
    status: 400,
    code: 'validation_error',
    send: (url, body) => postSignedRaw(url, `${body.slice(0, -1)},"tiket":"x"}`),
  },
  {
    name: 'a JSON array (correctly signed)',
    status: 400,
    code: 'validation_error',
    send: (url, body) => postSignedRaw(url, `[${body}]`),
  },
  {
    name: 'empty body (correctly signed)',
    status: 400,
    code: 'validation_error',
    send: (url) => postSignedRaw(url, ''),
  },
  {
    name: `oversize body (over ${MAX_BYTES} bytes, correctly signed)`,
    status: 413,
    code: 'payload_too_large',
    send: (url, body) => postSignedRaw(url, `${body.slice(0, -1)},"title":"${'x'.repeat(MAX_BYTES)}"}`),
  },
  {
    name: 'content-type text/plain (correctly signed)',
    status: 400,
    code: 'validation_error',
    send: (url, body) =>
      postFeed(url, body, { 'content-type': 'text/plain', ...genericSignature(SECRET, body, nowS()) }),
  },
  {
    name: 'content-type application/x-www-form-urlencoded (correctly signed)',
    status: 400,
    code: 'validation_error',
    send: (url, body) =>
      postFeed(url, body, {
        'content-type': 'application/x-www-form-urlencoded',
        ...genericSignature(SECRET, body, nowS()),
      }),
  },
  {
    name: 'a feed that is not configured (jira)',
    status: 404,
    code: 'feed_disabled',
    send: (url, body) =>
      postFeed(url.replace('/generic', '/jira'), body, { ...json, ...genericSignature(SECRET, body, nowS()) }),
  },
];

function postSignedRaw(url: string, body: string): Promise<FeedAnswer> {
  return postFeed(url, body, { ...json, ...genericSignature(SECRET, body, nowS()) });
}

describe('fault: a bad-webhook battery against a running feed-ingestor', () => {
  const cleanups = cleanupsAfterAll();

  it('every bad delivery refused with its code and never published; valid ones interleaved published exactly once', async () => {
    const brokers = requireKafka();
    const redisUrl = requireRedis();
    const run = `fb-${randomUUID().slice(0, 8)}`;
    const prefix = `fault:${run}`;
    const watchGroup = `fault-watch-${run}`;
    const redis = new Redis(redisUrl);
    cleanups.push(async () => {
      await deletePrefix(redis, prefix);
      redis.disconnect();
    });
    await startGroupsAtEnd(brokers, [{ groupId: watchGroup, topic: TOPICS.ticketUpdates }]);
    const watch = new TicketUpdatesWatch({ run, brokers });
    cleanups.push(() => watch.close());
    await watch.listen(watchGroup);

    const port = await freePort();
    const feed = new ServiceProcess({
      name: 'feed-ingestor',
      entry: ENTRIES.feedIngestor,
      port,
      env: serviceEnv({
        CTXFLOW_FEED_PORT: String(port),
        CTXFLOW_FEED_SECRET_GENERIC: SECRET,
        CTXFLOW_FEED_MAX_BYTES: String(MAX_BYTES),
        KAFKA_BROKERS: brokers.join(','),
        REDIS_URL: redisUrl,
        CTXFLOW_REDIS_PREFIX: prefix,
        CTXFLOW_LOG_LEVEL: 'error',
      }),
    });
    cleanups.push(() => feed.stop());
    await feed.start();
    const feedUrl = `http://127.0.0.1:${port}/feeds/generic`;

    const checker = new ExactlyOnce('bad-webhook battery');
    const refusals: string[] = [];
    let n = 0;
    const valid = async () => {
      const i = n++;
      const ticket = `${run}-t${i % TICKETS}`;
      const eventId = `${run}-e${i}`;
      const body = genericBody(eventId, ticket);
      checker.sent(`feed|${ticket}`, `generic:${eventId}`);
      const first = await postSigned(feedUrl, SECRET, body);
      expect(first).toMatchObject({ status: 202, body: { accepted: true, id: `generic:${eventId}` } });
      // A sender's replay of an accepted delivery: accepted again, published never again.
      const replay = await postSigned(feedUrl, SECRET, body);
      expect(replay).toMatchObject({
        status: 202,
        body: { accepted: true, id: `generic:${eventId}`, duplicate: true },
      });
    };

    for (let round = 0; round < ROUNDS; round++) {
      for (const bad of BATTERY) {
        await valid();
        // Every bad body names a ticket of this run: if one were published, the watch would see it.
        const body = genericBody(`${run}-bad${round}-${refusals.length}`, `${run}-bad`);
        const answer = await bad.send(feedUrl, body);
        checker.fault(`bad webhook: ${bad.name}`);
        refusals.push(`${bad.name}: ${answer.status} ${answer.body.error?.code}`);
        expect({ name: bad.name, status: answer.status, code: answer.body.error?.code }).toEqual({
          name: bad.name,
          status: bad.status,
          code: bad.code,
        });
        expect(answer.body.error?.retryable).toBe(false);
      }
    }
    await valid();

    await waitFor('every valid delivery on the topic', () => watch.count() >= n, 30_000, 100);
    // Late records would show here: give the consumer another moment.
    await sleep(2_000);
    expect(watch.odd).toEqual([]);
    const report = checker.check(watch.streams);
    expect(report.faults).toBe(ROUNDS * BATTERY.length);
    expect(report.inputs).toBe(n);
    expect(watch.streams.has(`feed|${run}-bad`)).toBe(false);
    await feed.stop();
  }, 90_000);
});
