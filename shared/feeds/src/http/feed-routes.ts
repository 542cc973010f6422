import type { KeyObject } from 'node:crypto';
import type { Publisher } from '@ctxflow/bus';
import {
  CLOUDEVENTS_SOURCE,
  CtxflowError,
  errorBody,
  FEED_SOURCE_NAME,
  FEED_SOURCES,
  type FeedSource,
  isCtxflowError,
  type TicketUpdate,
  TOPICS,
  ticketKey,
  updateTenant,
} from '@ctxflow/contracts';
import { errorAnswers, serializerCompiler, validatorCompiler } from '@ctxflow/service-kit';
import {
  ATTR_FEED_EVENT_ID,
  ATTR_FEED_SOURCE,
  ATTR_TICKET,
  ATTR_TOPIC,
  injectTraceContext,
  SPAN_PUBLISH,
  SPAN_WEBHOOK_INGEST,
  type SpanHandle,
  type SpanOptions,
} from '@ctxflow/telemetry';
import type { FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { CE_BATCH, CE_STRUCTURED, CLOUDEVENTS_MEDIA_TYPES, cloudEventUpdates } from '../domain/cloudevents-feed.ts';
import { type FeedSecrets, tenantSecrets } from '../domain/feed-secrets.ts';
import { feedOf } from '../domain/feeds.ts';
import { verifyGeneric } from '../domain/verifiers/generic.ts';
import {
  hasStandardWebhooksSignature,
  standardWebhooksKey,
  verifyStandardWebhooks,
} from '../domain/verifiers/standard-webhooks.ts';
import { secretKey } from '../domain/verifiers/verifier.ts';
import { type ClaimOutcome, DEFAULT_RETAIN_MS, type DeliveryLedger } from '../ports/delivery-ledger.ts';
import { type FeedTelemetry, noopFeedTelemetry } from '../ports/feed-telemetry.ts';
import { expectedMediaTypes, fromFastify, mediaTypeIsCloudEvents, parseJson, routeSource } from './feed-request.ts';

/** A feed's answer when it took a delivery (published, a duplicate, or a verified event it does not take). */
const feedAccepted = z
  .object({
    accepted: z.boolean().optional().describe('The delivery was taken (true when present)'),
    id: z.string().optional().describe('The delivery id (the TicketUpdate id)'),
    duplicate: z.boolean().optional().describe('Published before: not published again (true when present)'),
    ignored: z
      .boolean()
      .optional()
      .describe('Verified, but an event this feed does not take: nothing published (true when present)'),
    results: z
      .array(z.object({ id: z.string(), duplicate: z.boolean().optional() }))
      .optional()
      .describe('A CloudEvents batch: each event, in order'),
  })
  .meta({ id: 'FeedAccepted', title: 'FeedAccepted' });

const pascal = (name: string) => name.replace(/(^|-)([a-z0-9])/g, (_m, _dash, c: string) => c.toUpperCase());

/** A feed route's declaration: the raw body is the vendor's (verified on its bytes), any JSON. */
function feedSchema(source: string) {
  return {
    tags: ['feeds'],
    operationId: `receive${pascal(source)}Feed`,
    summary: `A signed ${source} webhook delivery (the raw JSON body, the source's signature headers)`,
    security: [],
    consumes: source === CLOUDEVENTS_SOURCE ? [...CLOUDEVENTS_MEDIA_TYPES] : ['application/json'],
    body: z.unknown().describe("The sender's JSON payload, verified on its raw bytes"),
    response: { 202: feedAccepted, ...errorAnswers(401, 404, 503) },
  };
}

/**
 * A source's secrets made into keys once: `keys` the HMAC keys of their UTF-8
 * bytes, `standard` their Standard Webhooks keys (`whsec_` decoded), `tenants`
 * the tenant of each, all in the same order.
 */
interface FeedKeys {
  keys: KeyObject[];
  standard: KeyObject[];
  tenants: string[];
}

/** Default body limit of a feed request, in bytes (256 KiB). */
export const DEFAULT_FEED_MAX_BYTES = 256 * 1024;
/** How long a delivery being published blocks a concurrent copy, in milliseconds. */
export const DEFAULT_LEASE_MS = 30_000;
export { DEFAULT_RETAIN_MS };
/** The `Retry-After` of a 503, in seconds. */
export const DEFAULT_RETRY_AFTER_S = 5;

export interface FeedRoutesDeps {
  /** Publishes to TOPICS.ticketUpdates; resolves only once the bus acknowledged. */
  publisher: Publisher;
  ledger: DeliveryLedger;
  /**
   * Per-source HMAC secrets, each naming its tenant (a plain string: the
   * single-tenant default's); a source without one answers 404 `feed_disabled`.
   */
  secrets: FeedSecrets;
  /** Epoch milliseconds; the signed-timestamp window and `receivedAt` use it. */
  clock?: () => number;
  /** Body limit in bytes (default 256 KiB); over it is 413 `payload_too_large`. */
  maxBodyBytes?: number;
  /**
   * How long a delivery being published holds its id (default 30 s): a copy
   * meanwhile is answered 503 + Retry-After; once it ends unconfirmed (the
   * instance died mid-publish), the next copy publishes.
   */
  leaseMs?: number;
  retainMs?: number;
  retryAfterSeconds?: number;
  /**
   * Ingest and refusal counters, and the spans: one `ctxflow.webhook.ingest`
   * (SERVER, child of an incoming `traceparent`) per delivery with a
   * `ctxflow.update.publish` (PRODUCER) inside it, whose trace context rides
   * in the record's `traceparent` / `tracestate` headers. Default: none.
   */
  telemetry?: FeedTelemetry;
}

const PRODUCER: SpanOptions = { kind: 'producer' };
/** The span handle of a delivery when the routes have no telemetry. */
const UNTRACED: SpanHandle = { traceparent: undefined, link() {}, setAttributes() {} };

/**
 * The delivery ledger's id of an update: `<tenant>:<source>:<eventId>`. A
 * tenant never contains ":" (CTXFLOW_API_KEYS splits at the first one), so
 * no two tenants' ids can meet.
 */
export function ledgerId(update: Pick<TicketUpdate, 'id' | 'tenant'>): string {
  return `${updateTenant(update)}:${update.id}`;
}

/**
 * `POST /feeds/<source>` for every built-in feed (FEED_SOURCES) and every
 * configured source (a name in `secrets` other than those: the generic
 * feed's format under that name). The generic and cloudevents feeds and the
 * configured sources also take Standard Webhooks signatures (a request with
 * `webhook-signature` is verified that way only). The plugin reads request
 * bodies as raw bytes (its own application/json parser, in this plugin's
 * encapsulated scope only: register it without fastify-plugin), verifies the
 * sender's signature over those bytes, normalizes to one TicketUpdate and
 * answers 202 only after the bus acknowledged it.
 *
 * Refusals publish nothing: 404 `feed_disabled` (no secret), 401
 * `unauthorized` (signature, timestamp), 400 `validation_error` (body), 413
 * `payload_too_large`, 503 `bus_unavailable` / `store_unavailable` with
 * `Retry-After`. A repeated delivery id is answered 202 and published once.
 * Neither secrets nor bodies are logged.
 */
export const feedRoutes: FastifyPluginAsync<FeedRoutesDeps> = async (app, deps) => {
  const clock = deps.clock ?? Date.now;
  const maxBodyBytes = deps.maxBodyBytes ?? DEFAULT_FEED_MAX_BYTES;
  const leaseMs = deps.leaseMs ?? DEFAULT_LEASE_MS;
  const retainMs = deps.retainMs ?? DEFAULT_RETAIN_MS;
  const retryAfter = String(deps.retryAfterSeconds ?? DEFAULT_RETRY_AFTER_S);
  const { publisher, ledger } = deps;
  const telemetry = deps.telemetry ?? noopFeedTelemetry;
  // Without telemetry no span is opened at all (no span attributes built, no wrapper around the handler).
  const traced = deps.telemetry !== undefined;
  // Each secret becomes its HMAC keys once, not on every delivery; the tenants in the same order.
  const keys: Partial<Record<FeedSource, FeedKeys>> = {};
  const sources = [...new Set([...FEED_SOURCES, ...Object.keys(deps.secrets)])];
  for (const source of sources) {
    if (!FEED_SOURCE_NAME.test(source)) {
      throw new Error(`feed source "${source}": expected lowercase letters, digits and "-", 1 to 32 characters`);
    }
    const secrets = deps.secrets[source];
    const pairs = secrets === undefined ? [] : tenantSecrets(secrets).filter((p) => p.secret !== '');
    if (pairs.length > 0) {
      keys[source] = {
        keys: pairs.map((p) => secretKey(p.secret)),
        standard: pairs.map((p) => {
          try {
            return standardWebhooksKey(p.secret);
          } catch (err) {
            throw new Error(`feed source "${source}": ${(err as Error).message}`);
          }
        }),
        tenants: pairs.map((p) => p.tenant),
      };
    }
  }

  // The routes' zod schemas work in any fastify app this plugin is registered in.
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: maxBodyBytes }, (_request, body, done) =>
    done(null, body),
  );
  // CloudEvents structured and batch mode; every other feed refuses them (ingest).
  app.addContentTypeParser(
    [CE_STRUCTURED, CE_BATCH],
    { parseAs: 'buffer', bodyLimit: maxBodyBytes },
    (_r, body, done) => done(null, body),
  );

  app.setErrorHandler((err: FastifyError, request, reply) => {
    const source = routeSource(request);
    const known = isCtxflowError(err) ? err : fromFastify(err, maxBodyBytes, source);
    if (source) telemetry.refused({ source, reason: known?.code ?? 'internal_error' });
    if (!known) {
      request.log.error({ errName: err.name, errCode: err.code }, 'feed request failed');
      return reply.status(500).send(errorBody(new CtxflowError('internal_error', 'internal error')));
    }
    if (known.status === 503) {
      reply.header('retry-after', retryAfter);
      const cause = known.cause instanceof Error ? known.cause.message : undefined;
      request.log.warn({ code: known.code, cause }, 'feed delivery not handed over');
    }
    return reply.status(known.status).send(errorBody(known));
  });

  async function publishOnce(update: TicketUpdate, request: FastifyRequest): Promise<'published' | 'duplicate'> {
    // One tenant's delivery ids never suppress another's: the ledger id names the tenant.
    const deliveryId = ledgerId(update);
    let claim: ClaimOutcome;
    try {
      claim = await ledger.claim(deliveryId, leaseMs);
    } catch (cause) {
      if (isCtxflowError(cause)) throw cause;
      throw new CtxflowError('store_unavailable', 'the delivery ledger did not answer', { cause });
    }
    if (claim === 'done') return 'duplicate';
    if (claim === 'in_flight') {
      throw new CtxflowError('bus_unavailable', 'this delivery is being published by another request; retry');
    }
    try {
      // The record carries the publish span's context: step-context continues the trace from it.
      const publish = () =>
        publisher.publish(TOPICS.ticketUpdates, [
          {
            key: ticketKey(update),
            value: JSON.stringify(update),
            headers: injectTraceContext({ 'ctxflow-record-id': update.id }),
          },
        ]);
      await (traced
        ? telemetry.withSpan(
            SPAN_PUBLISH,
            { [ATTR_TOPIC]: TOPICS.ticketUpdates, [ATTR_TICKET]: update.ticket, [ATTR_FEED_EVENT_ID]: update.id },
            publish,
            PRODUCER,
          )
        : publish());
    } catch (cause) {
      // If the release fails too, the lease still ends after leaseMs and frees the id.
      try {
        await ledger.release(deliveryId);
      } catch {
        request.log.warn({ id: update.id }, 'delivery lease not released');
      }
      throw new CtxflowError('bus_unavailable', 'the message bus did not acknowledge the update; retry', { cause });
    }
    // Published: a failed confirm only means a later retry may publish again (sinks drop it by record id).
    try {
      await ledger.confirm(deliveryId, retainMs);
    } catch {
      request.log.warn({ id: update.id }, 'delivery not confirmed');
    }
    return 'published';
  }

  /** One delivery of `source`, inside its ingest span (a no-op one without telemetry). */
  async function ingest(
    source: FeedSource,
    request: FastifyRequest,
    reply: FastifyReply,
    span: SpanHandle,
  ): Promise<FastifyReply> {
    const feedKeys = keys[source];
    if (!feedKeys) throw new CtxflowError('feed_disabled', `the ${source} feed is not configured`);
    // Only this scope's parsers yield a Buffer; another media type was parsed by another parser.
    if (request.body !== undefined && !Buffer.isBuffer(request.body)) {
      throw new CtxflowError('validation_error', `content-type: expected ${expectedMediaTypes(source)}`);
    }
    const rawBody = request.body ?? Buffer.alloc(0);
    const now = clock();
    if (source === CLOUDEVENTS_SOURCE) return ingestCloudEvents(feedKeys, request, reply, span, rawBody, now);
    if (request.body !== undefined && mediaTypeIsCloudEvents(request)) {
      throw new CtxflowError('validation_error', 'content-type: expected application/json');
    }
    const feed = feedOf(source);
    // The secret that verified the delivery names its tenant.
    const signed = { headers: request.headers, rawBody };
    const index =
      feed.alsoStandardWebhooks && hasStandardWebhooksSignature(request.headers)
        ? verifyStandardWebhooks(signed, feedKeys.standard, now)
        : feed.verify(signed, feed.keys === 'standard-webhooks' ? feedKeys.standard : feedKeys.keys, now);
    const tenant = feedKeys.tenants[index]!;
    const body = parseJson(rawBody);
    const outcome = feed.normalize({ headers: request.headers, body, receivedAt: new Date(now).toISOString() });
    if ('ignored' in outcome) {
      request.log.info({ source, reason: outcome.ignored }, 'feed event ignored');
      return reply.status(202).send({ ignored: true });
    }
    const { update } = outcome; // a fresh object of this delivery
    update.tenant = tenant;
    if (traced) span.setAttributes({ [ATTR_FEED_EVENT_ID]: update.id, [ATTR_TICKET]: update.ticket });
    const result = await publishOnce(update, request);
    telemetry.ingested({ source });
    request.log.info({ source, tenant, id: update.id, ticket: update.ticket, result }, 'feed delivery accepted');
    return reply
      .status(202)
      .send(
        result === 'duplicate' ? { accepted: true, id: update.id, duplicate: true } : { accepted: true, id: update.id },
      );
  }

  /**
   * One `POST /feeds/cloudevents` request (verified like the generic feed):
   * every event is validated before any is published (a batch is all or
   * nothing), then each is published once, in order (a repeated id is a
   * duplicate, also within one batch). A bus failure part-way answers 503;
   * the retry of the same request publishes only the events not yet
   * published (the ledger remembers the others).
   */
  async function ingestCloudEvents(
    feedKeys: FeedKeys,
    request: FastifyRequest,
    reply: FastifyReply,
    span: SpanHandle,
    rawBody: Buffer,
    now: number,
  ): Promise<FastifyReply> {
    const signed = { headers: request.headers, rawBody };
    const index = hasStandardWebhooksSignature(request.headers)
      ? verifyStandardWebhooks(signed, feedKeys.standard, now)
      : verifyGeneric(signed, feedKeys.keys, now);
    const tenant = feedKeys.tenants[index]!;
    const { mode, updates } = cloudEventUpdates(request.headers, rawBody, {
      tenant,
      receivedAt: new Date(now).toISOString(),
    });
    const results: { id: string; duplicate?: true }[] = [];
    for (const update of updates) {
      if (traced) span.setAttributes({ [ATTR_FEED_EVENT_ID]: update.id, [ATTR_TICKET]: update.ticket });
      const result = await publishOnce(update, request);
      telemetry.ingested({ source: CLOUDEVENTS_SOURCE });
      request.log.info(
        { source: CLOUDEVENTS_SOURCE, mode, tenant, id: update.id, ticket: update.ticket, result },
        'feed delivery accepted',
      );
      results.push(result === 'duplicate' ? { id: update.id, duplicate: true } : { id: update.id });
    }
    if (mode === 'batch') return reply.status(202).send({ accepted: true, results });
    return reply.status(202).send({ accepted: true, ...results[0] });
  }

  for (const source of sources) {
    const attributes = { [ATTR_FEED_SOURCE]: source };
    app.post(
      `/feeds/${source}`,
      { bodyLimit: maxBodyBytes, config: { source } as object, schema: feedSchema(source) },
      traced
        ? (request: FastifyRequest, reply: FastifyReply) =>
            telemetry.withSpan(SPAN_WEBHOOK_INGEST, attributes, (span) => ingest(source, request, reply, span), {
              kind: 'server',
              // A sender that traces its webhooks (traceparent header) becomes the parent.
              parentHeaders: request.headers,
            })
        : (request: FastifyRequest, reply: FastifyReply) => ingest(source, request, reply, UNTRACED),
    );
  }
};
