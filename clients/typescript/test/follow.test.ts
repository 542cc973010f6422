/**
 * `client.sessions.follow`: the session's stream over a real socket, its connections killed by the
 * server side mid-stream while messages keep arriving: every message is yielded exactly once, in
 * order (the reconnect sends `Last-Event-ID`, the server replays only what came after it); an
 * erased session ends the iteration with its 404; the signal ends it.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { CtxflowApiError, CtxflowClient, type StreamEvent } from '@ctxflow/client';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const KEY = 'follow-key';
let embedded: EmbeddedApp;
let client: CtxflowClient;
/** The sockets of open stream requests. */
const sockets = new Set<Socket>();
/** The Last-Event-ID of every stream request, in order (undefined for the first). */
const resumedFrom: (string | undefined)[] = [];

beforeAll(async () => {
  embedded = await buildEmbeddedApp({ config: { apiKeys: new Map([[KEY, 'tenant-follow']]), secrets: {} } });
  const baseURL = await embedded.app.listen({ port: 0, host: '127.0.0.1' });
  embedded.app.server.on('request', (request: IncomingMessage) => {
    if (!request.url?.endsWith('/stream')) return;
    resumedFrom.push(request.headers['last-event-id'] as string | undefined);
    const socket = request.socket;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  client = new CtxflowClient({ baseURL, apiKey: KEY });
});
afterAll(async () => embedded.close());

/**
 * Kills the open stream connections from the server's side (what a proxy reset or a dropped
 * network does), once the follower is connected; how many it killed.
 */
async function killConnections(): Promise<number> {
  for (let waited = 0; sockets.size === 0 && waited < 5_000; waited += 10) {
    await new Promise((done) => setTimeout(done, 10));
  }
  const count = sockets.size;
  for (const socket of sockets) socket.destroy();
  return count;
}

async function collect(events: AsyncGenerator<StreamEvent>, until: (seen: StreamEvent[]) => boolean) {
  const seen: StreamEvent[] = [];
  for await (const event of events) {
    seen.push(event);
    if (until(seen)) break;
  }
  return seen;
}

const contents = (events: StreamEvent[]) =>
  events.filter((e) => e.event === 'message').map((e) => (e.data as { content: string }).content);

describe('client.sessions.follow', () => {
  it('survives killed connections: every message once, in order, resumed after the last event id', async () => {
    const { agentId } = await client.agents.create({ context: 'You follow.' });
    const { sessionId } = await client.sessions.create({ agentId });
    const expected = Array.from({ length: 30 }, (_, i) => `m${i}`);
    resumedFrom.length = 0;
    const events = client.sessions.follow(sessionId, { retryDelayMs: 20 });
    const seen = collect(events, (so) => contents(so).length === expected.length);
    for (const [i, content] of expected.entries()) {
      await client.messages.create(sessionId, { role: 'user', content });
      // Three drops: messages 10-14 and 20-24 are sent while the follower may be away.
      if (i === 9 || i === 19 || i === 25) expect(await killConnections()).toBeGreaterThan(0);
    }
    const got = await seen;
    expect(contents(got)).toEqual(expected);
    const ids = got.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
    // The first request had no Last-Event-ID; each reconnect named an event already yielded.
    expect(resumedFrom[0]).toBeUndefined();
    expect(resumedFrom.length).toBeGreaterThan(1);
    for (const id of resumedFrom.slice(1)) expect(ids).toContain(id);
    expect(got.some((e) => e.event === 'replay_truncated')).toBe(false);
  });

  it('starts after a given event id, and a session erased meanwhile ends it with its 404', async () => {
    const { sessionId } = await client.sessions.create({});
    await client.messages.create(sessionId, { role: 'user', content: 'first' });
    await client.messages.create(sessionId, { role: 'user', content: 'second' });
    const [first] = await collect(client.sessions.follow(sessionId), (so) => so.length === 1);
    const rest = await collect(client.sessions.follow(sessionId, { lastEventId: first!.id! }), (so) => so.length === 1);
    expect(contents(rest)).toEqual(['second']);

    const events = client.sessions.follow(sessionId, { retryDelayMs: 20 });
    const ended = collect(events, () => false);
    await client.messages.create(sessionId, { role: 'user', content: 'third' });
    await client.sessions.delete(sessionId);
    await killConnections();
    const error = await ended.then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(CtxflowApiError);
    expect((error as CtxflowApiError).status).toBe(404);
    expect((error as CtxflowApiError).code).toBe('state_session_not_found');
  });

  it('the signal ends the iteration', async () => {
    const { sessionId } = await client.sessions.create({});
    const controller = new AbortController();
    const events = client.sessions.follow(sessionId, { signal: controller.signal });
    const done = collect(events, () => false);
    await client.messages.create(sessionId, { role: 'user', content: 'one' });
    setTimeout(() => controller.abort(), 200);
    expect(contents(await done)).toEqual(['one']);
  });
});
