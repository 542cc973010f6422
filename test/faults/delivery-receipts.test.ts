/**
 * Delivery receipts on the stack (real Kafka, a private Redis): a signed ticket update posted
 * to the session-runner's generic feed reaches a subscribed session through Kafka and
 * step-context; its receipt says accepted and published before any step. Then a step (with
 * its requestId) is frozen (SIGSTOP, Redis MONITOR: freeze-on-commit.ts) the moment its commit
 * script records the request: the hook row is in the session's outbox and the delivery index
 * has nothing yet. kill -9 of the runner there; the restarted runner's relay records the
 * receipt: the session, the step, the row, the request id.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { requireKafka } from '../support/services.ts';
import { cleanupsAfterAll } from './load-rig.ts';
import {
  freezeOnCommit,
  PrivateRedis,
  runnerAndStepContext,
  SESSION_TIMEOUT_MS,
  startGroupsAtEnd,
  waitFor,
} from './processes.ts';

const SECRET = 'fault-receipts-secret';

function signed(raw: string): Record<string, string> {
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = createHmac('sha256', SECRET).update(`${ts}.${raw}`).digest('hex');
  return { 'content-type': 'application/json', 'x-ctxflow-timestamp': ts, 'x-ctxflow-signature': `sha256=${sig}` };
}

describe('fault: delivery receipts across a kill -9 of the runner between commit and relay', () => {
  const cleanups = cleanupsAfterAll();

  it('the receipt shows accepted, published, then the session, step, row and request id recorded after the restart', async () => {
    const redisServer = await PrivateRedis.start({ aof: false });
    cleanups.push(() => redisServer.stop());
    const redis = new Redis(redisServer.url);
    cleanups.push(async () => redis.disconnect());
    const brokers = requireKafka();
    const run = `f-receipts-${randomUUID().slice(0, 8)}`;
    const prefix = `fault:${run}`;
    const runnerGroup = `${run}-runner`;
    const stepContextGroup = `${run}-step-context`;
    await startGroupsAtEnd(brokers, [
      { groupId: runnerGroup, topic: TOPICS.stepRequests },
      { groupId: stepContextGroup, topic: TOPICS.ticketUpdates },
    ]);
    const common = {
      KAFKA_BROKERS: brokers.join(','),
      REDIS_URL: redisServer.url,
      CTXFLOW_REDIS_PREFIX: prefix,
      KAFKA_SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
      CTXFLOW_LOG_LEVEL: 'error',
    };
    const { runner, stepContext, runnerPort, stepContextPort } = await runnerAndStepContext({
      common,
      runnerGroup,
      stepContextGroup,
      runnerEnv: { CTXFLOW_FEED_SECRET_GENERIC: SECRET },
    });
    cleanups.push(() => Promise.all([runner.stop(), stepContext.stop()]));
    await Promise.all([runner.start(), stepContext.start()]);
    const runnerUrl = `http://127.0.0.1:${runnerPort}`;
    const json = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${runnerUrl}${path}`, {
        method,
        ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
      });
      return { status: response.status, body: (await response.json()) as any };
    };

    const { sessionId } = (await json('POST', '/sessions', {})).body;
    const ticket = `T-${run}`;
    expect((await json('POST', `/sessions/${sessionId}/subscriptions`, { source: 'generic', ticket })).status).toBe(
      201,
    );
    const eventId = `evt-${run}`;
    const update = JSON.stringify({ eventId, ticket, summary: 'Customer replied: still broken' });
    const fed = await fetch(`${runnerUrl}/feeds/generic`, { method: 'POST', headers: signed(update), body: update });
    expect(fed.status).toBe(202);
    // The feed's ledger knows it: accepted and published; no step has carried it yet.
    expect(await json('GET', `/deliveries/generic/${eventId}`)).toEqual({
      status: 200,
      body: { source: 'generic', eventId, accepted: true, published: true, sessions: [] },
    });

    // step-context has the update for the session (its hook answers items) before the step.
    await waitFor(
      'step-context to hold the update',
      async () => {
        const hook = await fetch(`http://127.0.0.1:${stepContextPort}/step-context`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ sessionId, cursor: null, maxBytes: 32_768 }),
        });
        await hook.arrayBuffer();
        return hook.status === 200;
      },
      30_000,
    );

    // The step, frozen right after its commit: the hook row is in the outbox, not in the index.
    const freezer = await freezeOnCommit(redisServer.port, prefix, runner.pid);
    const inFlight = fetch(`${runnerUrl}/sessions/${sessionId}/steps`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ requestId: 'req-1' }),
    }).catch(() => undefined);
    const commit = await freezer.commit;
    expect(commit.requestId).toBe('req-1');
    expect(await redis.xlen(`${prefix}:{${sessionId}}:outbox`)).toBe(1);
    const receiptsKey = `${prefix}:feed:receipts:{default:generic:${eventId}}`;
    expect(await redis.exists(receiptsKey)).toBe(0);
    await runner.kill9();
    await inFlight;

    await runner.start();
    const receipt = await waitFor(
      'the receipt recorded by the restarted relay',
      async () => {
        const answer = await json('GET', `/deliveries/generic/${eventId}`);
        return answer.body.sessions.length > 0 ? answer : undefined;
      },
      30_000,
    );
    // The step again with its requestId: the committed one, its row the one the receipt names.
    const step = await json('POST', `/sessions/${sessionId}/steps`, { requestId: 'req-1' });
    expect(step.status).toBe(200);
    expect(step.body.stepId).toBe(commit.stepId);
    const row = step.body.rows[0];
    expect(row).toMatchObject({ source: 'hook', kind: 'notice' });
    expect(receipt).toEqual({
      status: 200,
      body: {
        source: 'generic',
        eventId,
        accepted: true,
        published: true,
        sessions: [{ sessionId, stepId: commit.stepId, rowId: row.id, requestId: 'req-1', at: expect.any(String) }],
      },
    });
    // Relayed entries leave the stream; the emptied stream stays until the session expires.
    await waitFor(
      'the outbox emptied',
      async () => (await redis.xlen(`${prefix}:{${sessionId}}:outbox`)) === 0,
      10_000,
    );
    expect(Object.keys(await redis.hgetall(receiptsKey))).toEqual([sessionId]);
  }, 120_000);
});
