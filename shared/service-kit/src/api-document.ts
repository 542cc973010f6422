import { STATUS_CODES } from 'node:http';
import { errorCodes, validationRefusal } from '@ctxflow/contracts';
import fastifySwagger from '@fastify/swagger';
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchemaCompiler, RouteOptions } from 'fastify';
import { createJsonSchemaTransform, createJsonSchemaTransformObject } from 'fastify-type-provider-zod';
import type { OpenAPIV3_1 } from 'openapi-types';
import { z } from 'zod';
import { type ErrorStatus, errorAnswers } from './error-answers.ts';

/** What the document says of the service that serves it. */
export interface ApiInfo {
  title: string;
  version: string;
  description: string;
}

const where: Record<string, string> = { body: 'body', querystring: 'querystring', params: 'path', headers: 'headers' };

/**
 * Fastify's validator compiler for zod route schemas: a request that does not match is refused
 * with 400 `validation_error` naming every problem (contracts' validationRefusal), before the
 * handler runs. Fastify hands a body validator `null` when no body came: that is no body
 * (a JSON `null` that did come is judged before, by refuseNullBody).
 */
export const validatorCompiler: FastifySchemaCompiler<z.ZodType> =
  ({ schema, httpPart }) =>
  (data) => {
    const parsed = schema.safeParse(httpPart === 'body' && data === null ? undefined : data);
    if (parsed.success) return { value: parsed.data };
    return { error: validationRefusal(parsed.error, where[httpPart ?? 'body'] ?? 'body') };
  };

/**
 * A preValidation hook: a body that is JSON `null` is judged as `null` by the route's body
 * schema (a route that expects an object refuses it), not taken for a missing body.
 */
export function refuseNullBody(request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void): void {
  const schema = request.routeOptions.schema?.body;
  if (request.body === null && schema instanceof z.ZodType) {
    const parsed = schema.safeParse(null);
    if (!parsed.success) {
      done(validationRefusal(parsed.error, 'body'));
      return;
    }
  }
  done();
}

/** Marks an operation whose body may be left out (fastify-swagger documents every body as required). */
const OPTIONAL_BODY = 'x-ctxflow-optional-body';

const routeTransform = createJsonSchemaTransform({ skipList: [] });
const objectTransform = createJsonSchemaTransformObject({});

type Transform = Parameters<typeof routeTransform>[0];

function transform(input: Transform) {
  const out = routeTransform(input);
  const body = input.schema?.body;
  if (body instanceof z.ZodType && body.safeParse(undefined).success) {
    (out.schema as Record<string, unknown>)[OPTIONAL_BODY] = true;
  }
  return out;
}

const REF = /"#\/components\/schemas\/([^"]+)"/g;

/**
 * The components the operations use, each under its schema's id: the type provider documents
 * every registered schema twice (as request, `<id>Input`, and as answer, `<id>`); only what the
 * paths reach (transitively) is kept, a schema used only in requests keeps its own name, and one
 * used in both is `<id>` and `<id>Input`, each titled so.
 */
function usedComponents(doc: OpenAPIV3_1.Document): OpenAPIV3_1.Document {
  const schemas = (doc.components?.schemas ?? {}) as Record<string, unknown>;
  const used = new Set<string>();
  const visit = (text: string) => {
    for (const [, name] of text.matchAll(REF)) {
      if (name === undefined || used.has(name)) continue;
      used.add(name);
      visit(JSON.stringify(schemas[name] ?? null));
    }
  };
  visit(JSON.stringify(doc.paths ?? {}));
  const rename = new Map<string, string>();
  for (const name of used) {
    const base = name.endsWith('Input') ? name.slice(0, -'Input'.length) : undefined;
    if (base && !used.has(base)) rename.set(name, base);
  }
  const kept: Record<string, unknown> = {};
  for (const name of [...used].sort()) {
    const schema = schemas[name] as Record<string, unknown> | undefined;
    // A schema both a request and an answer use is two components: the request's is titled `<id>Input`.
    kept[rename.get(name) ?? name] =
      schema?.title !== undefined && rename.get(name) === undefined && name.endsWith('Input') && name !== schema.title
        ? { ...schema, title: name }
        : schema;
  }
  const text = JSON.stringify({ ...doc, components: { ...doc.components, schemas: kept } }).replace(
    REF,
    (whole, name: string) => (rename.has(name) ? `"#/components/schemas/${rename.get(name)}"` : whole),
  );
  return JSON.parse(text) as OpenAPIV3_1.Document;
}

/** Each answer described by its status's name, an error answer by the codes it can carry. */
function describeAnswers(responses: Record<string, OpenAPIV3_1.ResponseObject>): void {
  for (const [status, response] of Object.entries(responses ?? {})) {
    const codes = Object.entries(errorCodes).filter(([, entry]) => String(entry.status) === status);
    response.description =
      codes.length > 0 && Number(status) >= 400
        ? codes.map(([code, entry]) => `\`${code}\`: ${entry.summary}`).join('; ')
        : (STATUS_CODES[Number(status)] ?? 'Success');
  }
}

/**
 * Error answers are JSON on every route: a route's `produces` (text/event-stream, text/html, ...)
 * is the media type of its success answers only, but fastify-swagger documents every answer with it.
 */
function jsonErrorAnswers(responses: Record<string, OpenAPIV3_1.ResponseObject>): void {
  for (const [status, response] of Object.entries(responses ?? {})) {
    const media = Object.values(response.content ?? {});
    if (Number(status) < 400 || media.length === 0 || response.content?.['application/json']) continue;
    response.content = { 'application/json': media[0]! };
  }
}

/** Calls `visit` on every object in a document's tree, parents before their children. */
function eachObject(node: unknown, visit: (object: Record<string, unknown>) => void): void {
  if (Array.isArray(node)) {
    for (const item of node) eachObject(item, visit);
    return;
  }
  if (typeof node !== 'object' || node === null) return;
  visit(node as Record<string, unknown>);
  for (const value of Object.values(node)) eachObject(value, visit);
}

const INT32_MAX = 2 ** 31 - 1;

/**
 * Gives an integer schema a `format`, so generators pick the right width: `int32` when its
 * bounds fit in 32 bits, else `int64`.
 */
function sizeInteger(schema: Record<string, unknown>): void {
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  if (!types.includes('integer') || schema.format !== undefined) return;
  const low = Number(schema.minimum ?? schema.exclusiveMinimum ?? Number.NEGATIVE_INFINITY);
  const high = Number(schema.maximum ?? schema.exclusiveMaximum ?? Number.POSITIVE_INFINITY);
  schema.format = low >= -INT32_MAX - 1 && high <= INT32_MAX ? 'int32' : 'int64';
}

const STRING_KEYWORDS = new Set(['type', 'minLength', 'maxLength', 'pattern', 'format']);
const ARRAY_KEYWORDS = new Set(['type', 'items', 'minItems', 'maxItems']);

/**
 * A string-or-list value (`oneOf: [string, array]`, as the agent's context) documented as one
 * schema of both types: the same values validate (each keyword applies to its own type), and
 * generators that cannot build a union of a string and a list (Java's) read it as one value.
 */
function mergeStringOrList(schema: Record<string, unknown>): void {
  const branches = schema.oneOf as Record<string, unknown>[] | undefined;
  if (!Array.isArray(branches) || branches.length !== 2) return;
  const text = branches.find((b) => b.type === 'string' && Object.keys(b).every((k) => STRING_KEYWORDS.has(k)));
  const list = branches.find((b) => b.type === 'array' && Object.keys(b).every((k) => ARRAY_KEYWORDS.has(k)));
  if (!text || !list) return;
  delete schema.oneOf;
  Object.assign(schema, text, list, { type: ['string', 'array'] });
}

function transformObject(input: Parameters<typeof objectTransform>[0]) {
  const doc = usedComponents(objectTransform(input) as OpenAPIV3_1.Document);
  eachObject(doc.components?.schemas, mergeStringOrList);
  eachObject([doc.components?.schemas, doc.paths], sizeInteger);
  for (const item of Object.values(doc.paths ?? {})) {
    for (const operation of Object.values(item ?? {}) as Record<string, unknown>[]) {
      if (typeof operation !== 'object' || operation === null) continue;
      describeAnswers(operation.responses as Record<string, OpenAPIV3_1.ResponseObject>);
      jsonErrorAnswers(operation.responses as Record<string, OpenAPIV3_1.ResponseObject>);
      if (!(OPTIONAL_BODY in operation)) continue;
      delete operation[OPTIONAL_BODY];
      const requestBody = operation.requestBody as OpenAPIV3_1.RequestBodyObject | undefined;
      if (requestBody) requestBody.required = false;
    }
  }
  return doc;
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The error answers any route can give before or around its handler, added to its declared
 * answers: 400 (the router: a malformed %-escape, an id over the limit; a query or body that
 * does not match), 408 and 431 (Node's HTTP parser), 500; with a body also 413 and 415.
 * A route outside a credentials scope is documented without security.
 */
function schemaOf(route: RouteOptions): Record<string, unknown> {
  route.schema ??= {};
  return route.schema as Record<string, unknown>;
}

function addTransportAnswers(route: RouteOptions): void {
  const schema = schemaOf(route);
  const statuses: ErrorStatus[] = [400, 408, 431, 500];
  if ([route.method].flat().some((m) => BODY_METHODS.has(m))) statuses.push(413, 415);
  schema.response = { ...errorAnswers(...statuses), ...(schema.response as object | undefined) };
  schema.security ??= [];
}

/**
 * For a plugin scope whose routes need credentials: each declares its scope (`config.scope`)
 * and is documented with the bearer scheme requiring that scope (OpenAPI 3.1 lets a
 * non-OAuth requirement list the roles it needs), its 401 (the credentials hook), 403 (a
 * caller without the scope), 429 (the tenant's request rate) and 503 (a store or the bus
 * did not answer). A secured route without a scope is a startup error.
 */
export function securedRoute(route: RouteOptions): void {
  const scope = (route.config as { scope?: string } | undefined)?.scope;
  if (!scope) throw new Error(`${[route.method].flat().join(',')} ${route.url}: a secured route declares config.scope`);
  const schema = schemaOf(route);
  schema.response = { ...errorAnswers(401, 403, 429, 503), ...(schema.response as object | undefined) };
  schema.security = [{ bearer: [scope] }];
}

/**
 * Registers the OpenAPI 3.1 document of every route the server declares (fastify's swagger
 * plugin over the routes' zod schemas) and `GET /openapi.json`, which needs no credentials.
 * Call before any route is added.
 */
export function registerApiDocument(app: FastifyInstance, info: ApiInfo): void {
  app.addHook('onRoute', addTransportAnswers);
  app.addHook('preValidation', refuseNullBody);
  app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info,
      components: {
        securitySchemes: {
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description:
              'An API key (CTXFLOW_API_KEYS, CTXFLOW_API_KEYS_FILE) or a JWT of the configured issuer ' +
              '(CTXFLOW_OIDC_ISSUER); each operation names the scope it needs: ctxflow:read, ctxflow:write ' +
              'or ctxflow:admin',
          },
        },
      },
    },
    transform,
    transformObject,
  });
  app.register(async (scope) => {
    scope.get(
      '/openapi.json',
      {
        schema: {
          operationId: 'getOpenApi',
          summary: 'This document',
          tags: ['operations'],
          response: { 200: z.record(z.string(), z.unknown()).describe('An OpenAPI 3.1 document') },
        },
      },
      async () => app.swagger(),
    );
  });
}
