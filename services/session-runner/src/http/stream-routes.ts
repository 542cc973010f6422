/** A session's server-sent event stream. */
import { SCOPE } from '@ctxflow/service-kit';
import { z } from 'zod';
import { notFound, type RouteApi, type RouteContext, sessionParams } from './route-kit.ts';
import { streamHeaders, streamQuery } from './schemas.ts';
import { boundedReplay, eventsAfter, type StreamFollowers } from './stream-followers.ts';

export function streamRoutes(api: RouteApi, { engine }: RouteContext, streams: StreamFollowers): void {
  const sessions = { tags: ['sessions'] };
  /**
   * Server-sent events: `message`, `step`, `rewind` and `context_skipped`
   * chunks, never a context row (R4, R26). `?follow=false` replays the recent
   * chunks and ends. The replay holds the newest chunks within
   * `STREAM_REPLAY_BYTES`, after one `replay_truncated` event counting the
   * older ones left out; a follower whose client leaves more than
   * `STREAM_BUFFER_BYTES` unread is dropped; each chunk carries an event id, and a
   * client that reconnects with `Last-Event-ID` is replayed what came after it; at
   * shutdown every follower gets a
   * `shutdown` event and its response ends.
   */
  api.get(
    '/sessions/:sessionId/stream',
    {
      config: { scope: SCOPE.read },
      schema: {
        ...sessions,
        operationId: 'streamSession',
        summary: 'Server-sent events (`?follow=false` replays and ends)',
        params: sessionParams,
        querystring: streamQuery,
        headers: streamHeaders,
        produces: ['text/event-stream'],
        response: { 200: z.string().describe('Server-sent events'), 404: notFound },
      },
    },
    async (request, reply) => {
      await engine.snapshot(request.tenant, request.params.sessionId);
      reply.hijack();
      reply.raw.writeHead(200, {
        'content-type': 'text/event-stream',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
      });
      // The client sees the stream open even before its first event.
      reply.raw.flushHeaders();
      const { sessionId } = request.params;
      const replay = eventsAfter(engine.recentEvents(sessionId), request.headers['last-event-id']);
      for (const frame of boundedReplay(replay.events, streams.limits.replayBytes, replay.omitted)) {
        reply.raw.write(frame);
      }
      if (request.query.follow === 'false') {
        reply.raw.end();
        return;
      }
      streams.follow(reply.raw, sessionId, (send) => engine.subscribe(sessionId, send));
    },
  );
}
