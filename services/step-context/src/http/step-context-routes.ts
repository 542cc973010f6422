import {
  CtxflowError,
  cursorSchema,
  idSchema,
  jsonDepthWithin,
  MAX_BATCH_BYTES,
  MAX_JSON_DEPTH,
} from '@ctxflow/contracts';
import type { ServiceTokens } from '@ctxflow/service-kit';
import { formatTraceLinks, TRACE_LINKS_HEADER } from '@ctxflow/telemetry';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { FeedStepContext } from '../domain/feed-step-context.ts';

export interface StepContextRoutesDeps {
  feed: FeedStepContext;
  /** CTXFLOW_SERVICE_TOKEN_FILE: a caller must present one of them as its bearer; absent: no credentials asked. */
  serviceTokens?: ServiceTokens;
}

/** Default batch limit when the caller names none (R25: 32 KiB). */
const DEFAULT_MAX_BYTES = 32 * 1024;

/** The caller's own timeout ends the HTTP exchange; a read of the store is short. */
const NEVER_ABORTED = new AbortController().signal;

const bodySchema = z.strictObject({
  sessionId: idSchema,
  cursor: cursorSchema.nullable().optional(),
  maxBytes: z.number().int().min(64).max(MAX_BATCH_BYTES).optional(),
  agentId: idSchema.optional(),
});

/**
 * `POST /step-context`: the feed as an HTTP stepContext hook, for a
 * session-runner in another process (its HttpStepContext).
 * Body `{ sessionId, cursor, maxBytes? }` (cursor null before the first batch);
 * answers 200 `{ items, cursor }` within maxBytes, or 204 when nothing is new.
 * A 200 carries `ctxflow-trace-links`: the traceparents of the ticket updates
 * the batch covers (comma separated, at most 32), for the runner's span links;
 * the body stays exactly the hook result.
 * Service-to-service: with service tokens, a caller without one of them is 401
 * `unauthorized` (a tenant's key is not one); without, mount it where only the runner
 * can reach it.
 */
export async function stepContextRoutes(app: FastifyInstance, deps: StepContextRoutesDeps): Promise<void> {
  const tokens = deps.serviceTokens;
  if (tokens) {
    app.addHook('onRequest', (request, _reply, done) => {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '');
      if (match && tokens.accepts(match[1]!)) done();
      else done(new CtxflowError('unauthorized', 'this route takes the service token (CTXFLOW_SERVICE_TOKEN_FILE)'));
    });
  }
  app.post('/step-context', async (request, reply) => {
    if (!jsonDepthWithin((request.body as { cursor?: unknown } | undefined)?.cursor)) {
      throw new CtxflowError('validation_error', `cursor: nested deeper than ${MAX_JSON_DEPTH} levels`);
    }
    const parsed = bodySchema.safeParse(request.body);
    if (!parsed.success) {
      const message = parsed.error.issues.map((i) => `${i.path.join('.') || 'body'}: ${i.message}`).join('; ');
      throw new CtxflowError('validation_error', message);
    }
    const { sessionId, cursor, maxBytes } = parsed.data;
    let traceparents: readonly string[] = [];
    const batch = await deps.feed.fetch({
      sessionId,
      cursor: cursor ?? undefined,
      maxBytes: maxBytes ?? DEFAULT_MAX_BYTES,
      signal: NEVER_ABORTED,
      traced: (t) => {
        traceparents = t;
      },
    });
    if (!batch) return reply.status(204).send();
    const links = formatTraceLinks(traceparents);
    if (links) reply.header(TRACE_LINKS_HEADER, links);
    return reply.status(200).send(batch);
  });
}
