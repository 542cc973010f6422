import { type ErrorCode, errorCodes, FEED_SOURCES, STEP_MODES } from '@ctxflow/contracts';
import { subscriptionBodySchema } from '@ctxflow/step-context';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  answerBody,
  approvalBody,
  branchBody,
  callContextBody,
  createAgentBody,
  createSessionBody,
  memoryBody,
  messageBatchBody,
  messageBody,
  patchAgentBody,
  patchSessionBody,
  postContextBody,
  restartBody,
  rewindBody,
  stepBody,
  toolCallBody,
} from './schemas.ts';

/**
 * The OpenAPI 3.1 document of the public HTTP API, built from the zod schemas the routes parse
 * their bodies with (`z.toJSONSchema`, draft 2020-12, the dialect of OpenAPI 3.1) and from the
 * answer schemas below. One list of operations; a test checks that every route an app registers
 * is in it with the same method and path.
 */

const cursor = z.json().describe('An opaque cursor (any JSON value).');
const rowKind = z.enum(['instruction', 'notice', 'tools', 'memory']);
const rowSource = z.enum(['app', 'hook', 'tool', 'memory', 'late-answer']);
const contextRow = z.object({
  id: z.string(),
  role: z.literal('context'),
  kind: rowKind,
  source: rowSource,
  content: z.string().optional(),
  disable: z.array(z.string()).optional(),
  enable: z.array(z.string()).optional(),
  cursor: cursor.optional(),
});
const toolCall = z.object({ callId: z.string(), name: z.string(), arguments: z.string() });
const requestTool = z.object({
  name: z.string(),
  description: z.string().optional(),
  parameters: z.record(z.string(), z.unknown()).optional(),
  strict: z.boolean().optional(),
});
const neutralMessage = z.union([
  z.object({
    role: z.enum(['system', 'user']),
    content: z.string(),
    row: z.object({ id: z.string(), kind: rowKind, source: rowSource }),
  }),
  z.object({ role: z.literal('system'), content: z.string() }),
  z.object({ role: z.literal('user'), content: z.string() }),
  z.object({ role: z.literal('assistant'), content: z.string(), toolCalls: z.array(toolCall).optional() }),
  z.object({ role: z.literal('tool'), content: z.string(), callId: z.string(), name: z.string() }),
  z.object({
    role: z.literal('tool'),
    content: z.string(),
    callId: z.string().optional(),
    name: z.string().optional(),
  }),
]);
const neutralRequest = z
  .object({
    messages: z.array(neutralMessage),
    tools: z.array(requestTool),
    activeTools: z.array(z.string()),
    system: z.string(),
    model: z.string().nullable(),
    toolChoice: z.union([z.literal('auto'), z.object({ type: z.literal('tool'), name: z.string() })]),
  })
  .meta({ title: 'NeutralRequest' });
const rebuildReason = z.enum(['new_thread', 'agent_context', 'model_change', 'force_refresh', 'cache_cold', 'branch']);
const stepAnswer = z.object({
  stepId: z.string(),
  mode: z.enum(STEP_MODES),
  rows: z.array(contextRow),
  request: z
    .union([neutralRequest, z.record(z.string(), z.unknown()).meta({ title: 'ProviderRequest' })])
    .describe("The neutral request (the default), or with `format` that provider API's body without `model`."),
  cursor: cursor.nullable(),
  cache: z.object({
    rebuilt: z.boolean(),
    reason: rebuildReason.nullable(),
    key: z.string(),
    prefixEnd: z.number().int(),
    previousEnd: z.number().int(),
  }),
  skipped: z.array(z.object({ reason: z.string(), message: z.string() })),
});
const contextBlock = z.object({ id: z.string().optional(), content: z.string() });
const agentAnswer = z.object({
  agentId: z.string(),
  context: z.array(contextBlock),
  model: z.string().nullable(),
  tools: z.array(
    requestTool.extend({
      client: z.boolean().optional(),
      deadlineMs: z.number().optional(),
      needsApproval: z.boolean().optional(),
    }),
  ),
  stepContext: z.object({ url: z.string().optional(), maxBytes: z.number(), timeoutMs: z.number() }),
  memory: z.object({ autoInject: z.boolean() }),
  cacheTtlMs: z.number(),
  version: z.number().int(),
});
const listedMessage = z.object({
  seq: z.number().int(),
  role: z.enum(['user', 'assistant', 'tool']),
  content: z.string(),
  at: z.string(),
  callId: z.string().optional(),
  name: z.string().optional(),
  outcome: z.enum(['tool_inactive', 'tool_unavailable', 'approval_denied', 'deadline_missed', 'finished']).optional(),
  toolCalls: z.array(toolCall.partial({ arguments: true })).optional(),
});
const toolDecision = z.union([
  z.object({ execute: z.literal(true), client: z.literal(true).optional(), deadlineAt: z.string().optional() }),
  z.object({
    execute: z.literal(false),
    reason: z.enum(['tool_inactive', 'tool_unavailable', 'approval_required', 'approval_denied']),
  }),
]);
const subscription = z.object({ source: z.enum(FEED_SOURCES), ticket: z.string(), scope: z.string().optional() });
const sessionSnapshot = z.object({
  sessionId: z.string(),
  agentId: z.string().nullable(),
  createdAt: z.string(),
  branchOf: z.object({ sessionId: z.string(), atStepId: z.string().optional() }).nullable(),
  messages: z.array(listedMessage),
  steps: z.number().int(),
  queued: z.number().int(),
  cursor: cursor.nullable(),
  activeTools: z.array(z.string()),
});
const errorBodySchema = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    retryable: z.boolean(),
    details: z.unknown().optional(),
  }),
});

type Method = 'get' | 'post' | 'patch' | 'delete';
/** An answer's body: JSON of a schema, text of a media type, or none (204). */
type Content = { json: z.ZodType } | { text: string } | { empty: true };

interface Operation {
  method: Method;
  /** A fastify path (`:param`). */
  path: string;
  summary: string;
  /** Needs `Authorization: Bearer <key>` when CTXFLOW_API_KEYS is set. */
  auth: boolean;
  body?: z.ZodType;
  /** Query parameters, each optional. */
  query?: { name: string; description: string; schema: Record<string, unknown> }[];
  /** The success status and answer. */
  status: number;
  answer: Content;
  errors: ErrorCode[];
}

const BODY_ERRORS: ErrorCode[] = ['validation_error', 'payload_too_large'];
const SESSION_ERRORS: ErrorCode[] = ['unauthorized', 'state_session_not_found'];

/** Every operation of the public API (embedded app and session-runner). */
export const OPERATIONS: readonly Operation[] = [
  {
    method: 'get',
    path: '/healthz',
    summary: 'Liveness',
    auth: false,
    status: 200,
    answer: { json: z.object({ status: z.literal('ok') }) },
    errors: [],
  },
  {
    method: 'get',
    path: '/readyz',
    summary: 'Readiness (503 when a check fails)',
    auth: false,
    status: 200,
    answer: { json: z.object({ status: z.enum(['ready', 'not_ready']), checks: z.record(z.string(), z.string()) }) },
    errors: [],
  },
  {
    method: 'get',
    path: '/metrics',
    summary: 'Prometheus metrics',
    auth: false,
    status: 200,
    answer: { text: 'text/plain' },
    errors: [],
  },
  {
    method: 'get',
    path: '/openapi.json',
    summary: 'This document',
    auth: false,
    status: 200,
    answer: { json: z.record(z.string(), z.unknown()) },
    errors: [],
  },
  {
    method: 'get',
    path: '/inspector',
    summary: 'The inspector page',
    auth: false,
    status: 200,
    answer: { text: 'text/html' },
    errors: [],
  },
  {
    method: 'get',
    path: '/inspector/app.js',
    summary: "The inspector's script",
    auth: false,
    status: 200,
    answer: { text: 'text/javascript' },
    errors: [],
  },
  {
    method: 'get',
    path: '/inspector/app.css',
    summary: "The inspector's style",
    auth: false,
    status: 200,
    answer: { text: 'text/css' },
    errors: [],
  },
  ...FEED_SOURCES.map(
    (source): Operation => ({
      method: 'post',
      path: `/feeds/${source}`,
      summary: `A signed ${source} webhook delivery (raw JSON body, the source's signature headers)`,
      auth: false,
      body: z.record(z.string(), z.unknown()),
      status: 202,
      answer: {
        json: z.union([
          z.object({ accepted: z.literal(true), id: z.string(), duplicate: z.literal(true).optional() }),
          z.object({ ignored: z.literal(true) }),
        ]),
      },
      errors: ['validation_error', 'unauthorized', 'feed_disabled', 'payload_too_large', 'bus_unavailable'],
    }),
  ),
  {
    method: 'post',
    path: '/agents',
    summary: 'Create an agent',
    auth: true,
    body: createAgentBody,
    status: 201,
    answer: { json: z.object({ agentId: z.string() }) },
    errors: [...BODY_ERRORS, 'unauthorized'],
  },
  {
    method: 'get',
    path: '/agents/:agentId',
    summary: 'Read an agent',
    auth: true,
    status: 200,
    answer: { json: agentAnswer },
    errors: ['unauthorized', 'state_agent_not_found'],
  },
  {
    method: 'patch',
    path: '/agents/:agentId',
    summary: 'Change agent context or model (from the next run)',
    auth: true,
    body: patchAgentBody,
    status: 200,
    answer: { json: z.object({ agentId: z.string(), version: z.number().int(), appliesFrom: z.literal('next_run') }) },
    errors: [...BODY_ERRORS, 'unauthorized', 'state_agent_not_found'],
  },
  {
    method: 'delete',
    path: '/agents/:agentId',
    summary: 'Erase an agent and its memories (idempotent); with cascade=true its sessions too',
    auth: true,
    query: [
      {
        name: 'cascade',
        description: "`true`: erase the agent's sessions too; else 409 `state_agent_in_use` while it has any",
        schema: { type: 'string', enum: ['true', 'false'] },
      },
    ],
    status: 204,
    answer: { empty: true },
    errors: ['validation_error', 'unauthorized', 'state_agent_in_use', 'store_unavailable'],
  },
  {
    method: 'post',
    path: '/agents/:agentId/memories',
    summary: 'Remember a memory',
    auth: true,
    body: memoryBody,
    status: 201,
    answer: { json: z.object({ remembered: z.literal(true) }) },
    errors: [...BODY_ERRORS, 'unauthorized', 'state_agent_not_found'],
  },
  {
    method: 'post',
    path: '/sessions',
    summary: 'Create a session',
    auth: true,
    body: createSessionBody,
    status: 201,
    answer: { json: z.object({ sessionId: z.string() }) },
    errors: [...BODY_ERRORS, 'unauthorized', 'state_agent_not_found'],
  },
  {
    method: 'get',
    path: '/sessions',
    summary: "The tenant's sessions",
    auth: true,
    status: 200,
    answer: {
      json: z.object({
        sessions: z.array(
          z.object({
            sessionId: z.string(),
            agentId: z.string().nullable(),
            createdAt: z.string(),
            steps: z.number().int(),
            branchOf: z.object({ sessionId: z.string(), atStepId: z.string().optional() }).nullable(),
          }),
        ),
      }),
    },
    errors: ['unauthorized'],
  },
  {
    method: 'get',
    path: '/sessions/:sessionId',
    summary: 'A snapshot a user may see (no context row)',
    auth: true,
    status: 200,
    answer: { json: sessionSnapshot },
    errors: SESSION_ERRORS,
  },
  {
    method: 'get',
    path: '/sessions/:sessionId/inspect',
    summary: "The operator's view, rows included",
    auth: true,
    status: 200,
    answer: { json: z.record(z.string(), z.unknown()) },
    errors: SESSION_ERRORS,
  },
  {
    method: 'patch',
    path: '/sessions/:sessionId',
    summary: 'Thread context (staged until the next rebuild) or forceRefresh',
    auth: true,
    body: patchSessionBody,
    status: 200,
    answer: { json: z.object({ staged: z.boolean(), forceRefresh: z.boolean() }) },
    errors: [...BODY_ERRORS, ...SESSION_ERRORS],
  },
  {
    method: 'delete',
    path: '/sessions/:sessionId',
    summary: 'Erase a session in every store (idempotent)',
    auth: true,
    status: 204,
    answer: { empty: true },
    errors: ['validation_error', 'unauthorized', 'store_unavailable'],
  },
  {
    method: 'post',
    path: '/context',
    summary: 'Add context items (idempotent with `key`)',
    auth: true,
    body: postContextBody,
    status: 200,
    answer: { json: z.object({ recorded: z.number().int() }) },
    errors: [...BODY_ERRORS, ...SESSION_ERRORS, 'state_context_key_conflict', 'state_conflict', 'store_unavailable'],
  },
  {
    method: 'post',
    path: '/sessions/:sessionId/steps',
    summary: 'The context pass before one model call (idempotent with `requestId`)',
    auth: true,
    body: stepBody,
    status: 200,
    answer: { json: stepAnswer },
    errors: [...BODY_ERRORS, ...SESSION_ERRORS, 'state_calls_pending', 'state_conflict', 'store_unavailable'],
  },
  {
    method: 'post',
    path: '/sessions/:sessionId/runs/restart',
    summary: 'Restart a failed run from its start',
    auth: true,
    body: restartBody,
    status: 200,
    answer: { json: stepAnswer },
    errors: [...BODY_ERRORS, ...SESSION_ERRORS, 'state_calls_pending', 'state_conflict', 'store_unavailable'],
  },
  {
    method: 'post',
    path: '/sessions/:sessionId/messages',
    summary: 'Record a message, or `{ messages }` in one write',
    auth: true,
    body: z.union([messageBody, messageBatchBody]),
    status: 201,
    answer: { json: z.union([z.object({ seq: z.number().int() }), z.object({ seqs: z.array(z.number().int()) })]) },
    errors: [...BODY_ERRORS, ...SESSION_ERRORS, 'state_calls_pending', 'state_conflict'],
  },
  {
    method: 'get',
    path: '/sessions/:sessionId/messages',
    summary: 'Messages a user may see',
    auth: true,
    status: 200,
    answer: { json: z.object({ messages: z.array(listedMessage) }) },
    errors: SESSION_ERRORS,
  },
  {
    method: 'post',
    path: '/sessions/:sessionId/tool-calls',
    summary: 'The tool gate',
    auth: true,
    body: toolCallBody,
    status: 200,
    answer: { json: toolDecision },
    errors: [...BODY_ERRORS, ...SESSION_ERRORS],
  },
  {
    method: 'post',
    path: '/sessions/:sessionId/tool-calls/:callId/context',
    summary: "A tool's or hook's addContext (first wins)",
    auth: true,
    body: callContextBody,
    status: 200,
    answer: { json: z.object({ recorded: z.number().int() }) },
    errors: [...BODY_ERRORS, ...SESSION_ERRORS],
  },
  {
    method: 'post',
    path: '/sessions/:sessionId/tool-calls/:callId/approval',
    summary: 'Approve or deny a call',
    auth: true,
    body: approvalBody,
    status: 200,
    answer: { json: toolDecision },
    errors: [...BODY_ERRORS, ...SESSION_ERRORS, 'state_call_not_found'],
  },
  {
    method: 'post',
    path: '/sessions/:sessionId/tool-calls/:callId/answer',
    summary: "A client tool's answer",
    auth: true,
    body: answerBody,
    status: 200,
    answer: { json: z.object({ late: z.boolean(), recorded: z.number().int() }) },
    errors: [...BODY_ERRORS, ...SESSION_ERRORS, 'state_call_not_found'],
  },
  {
    method: 'post',
    path: '/sessions/:sessionId/rewind',
    summary: 'Truncate the log to a step',
    auth: true,
    body: rewindBody,
    status: 200,
    answer: {
      json: z.object({
        logLength: z.number().int(),
        requeued: z.number().int(),
        queued: z.number().int(),
        cursor: cursor.nullable(),
        activeTools: z.array(z.string()),
      }),
    },
    errors: [...BODY_ERRORS, ...SESSION_ERRORS, 'state_step_not_found'],
  },
  {
    method: 'post',
    path: '/sessions/:sessionId/branches',
    summary: 'Branch a session',
    auth: true,
    body: branchBody,
    status: 201,
    answer: { json: z.object({ sessionId: z.string() }) },
    errors: [...BODY_ERRORS, ...SESSION_ERRORS, 'state_step_not_found'],
  },
  {
    method: 'get',
    path: '/sessions/:sessionId/stream',
    summary: 'Server-sent events (`?follow=false` replays and ends)',
    auth: true,
    status: 200,
    answer: { text: 'text/event-stream' },
    errors: SESSION_ERRORS,
  },
  {
    method: 'post',
    path: '/sessions/:sessionId/subscriptions',
    summary: 'Subscribe a session to a ticket',
    auth: true,
    body: subscriptionBodySchema,
    status: 201,
    answer: { json: z.object({ sessionId: z.string(), subscription, created: z.boolean() }) },
    errors: [...BODY_ERRORS, ...SESSION_ERRORS],
  },
  {
    method: 'delete',
    path: '/sessions/:sessionId/subscriptions',
    summary: 'Unsubscribe (fields in the body or the query)',
    auth: true,
    body: subscriptionBodySchema,
    status: 200,
    answer: { json: z.object({ sessionId: z.string(), subscription, removed: z.boolean() }) },
    errors: [...BODY_ERRORS, ...SESSION_ERRORS],
  },
  {
    method: 'get',
    path: '/sessions/:sessionId/subscriptions',
    summary: "A session's subscriptions",
    auth: true,
    status: 200,
    answer: { json: z.object({ sessionId: z.string(), subscriptions: z.array(subscription) }) },
    errors: SESSION_ERRORS,
  },
];

/** A fastify path as an OpenAPI path: `:param` -> `{param}`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

/** Definitions zod hoists (recursive schemas), moved into `components.schemas` under unique names. */
const hoisted: Record<string, unknown> = {};

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const out = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  delete out.$schema;
  const defs = out.$defs as Record<string, unknown> | undefined;
  if (!defs) return out;
  delete out.$defs;
  const prefix = `S${Object.keys(hoisted).length}_`;
  const text = JSON.stringify({ out, defs }).replace(/"#\/\$defs\/([^"]+)"/g, `"#/components/schemas/${prefix}$1"`);
  const moved = JSON.parse(text) as { out: Record<string, unknown>; defs: Record<string, unknown> };
  for (const [name, def] of Object.entries(moved.defs)) hoisted[`${prefix}${name}`] = def;
  return moved.out;
}

let built: Record<string, unknown> | undefined;

/** The OpenAPI 3.1 document (built once). */
export function openApiDocument(): Record<string, unknown> {
  if (built) return built;
  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of OPERATIONS) {
    const path = openApiPath(op.path);
    const params: Record<string, unknown>[] = [...op.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string' },
    }));
    for (const q of op.query ?? []) params.push({ ...q, in: 'query', required: false });
    const success: Record<string, unknown> = { description: 'Success' };
    if ('json' in op.answer) success.content = { 'application/json': { schema: jsonSchema(op.answer.json, 'output') } };
    else if ('text' in op.answer) success.content = { [op.answer.text]: { schema: { type: 'string' } } };
    const responses: Record<string, unknown> = { [String(op.status)]: success };
    const byStatus = new Map<number, ErrorCode[]>();
    for (const code of new Set<ErrorCode>([...op.errors, 'internal_error'])) {
      const { status } = errorCodes[code];
      byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
    }
    for (const [status, codes] of [...byStatus].sort((a, b) => a[0] - b[0])) {
      responses[String(status)] = {
        description: codes.map((c) => `\`${c}\`: ${errorCodes[c].summary}`).join('; '),
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      };
    }
    paths[path] ??= {};
    paths[path][op.method] = {
      operationId: `${op.method}${path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+([A-Za-z0-9])?/g, (_, c: string | undefined) => (c ?? '').toUpperCase())}`,
      summary: op.summary,
      ...(op.auth ? {} : { security: [] }),
      ...(params.length ? { parameters: params } : {}),
      ...(op.body
        ? {
            requestBody: {
              required: op.body !== stepBody && op.body !== restartBody && op.body !== branchBody,
              content: { 'application/json': { schema: jsonSchema(op.body, 'input') } },
            },
          }
        : {}),
      responses,
    };
  }
  built = {
    openapi: '3.1.0',
    info: {
      title: 'ctxflow',
      version: '2.0.0',
      description: 'Ticket updates into running AI-agent sessions as context rows, exactly once, prompt cache intact.',
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'A key of CTXFLOW_API_KEYS (when set)' },
      },
      schemas: { Error: jsonSchema(errorBodySchema, 'output'), ...hoisted },
    },
  };
  return built;
}

/** `GET /openapi.json`, without credentials (like /healthz). */
export async function openApiRoutes(app: FastifyInstance): Promise<void> {
  app.get('/openapi.json', async () => openApiDocument());
}
