/**
 * Helpers for the HTTP conformance suite: thin wrappers over `createHarness()`
 * that assert the status of every set-up call, so a test body reads as the
 * requirement it proves.
 */
import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import { createHarness, type Harness } from '../support/harness.ts';

export type Item = Record<string, unknown>;

export interface Session extends Harness {
  sessionId: string;
  agentId: string | undefined;
}

/** A harness with one agent (when `agent` is given) and one session of it. */
export async function openSession(
  options: { agent?: Record<string, unknown>; session?: Record<string, unknown> } & Parameters<
    typeof createHarness
  >[0] = {},
): Promise<Session> {
  const { agent, session, ...harnessOptions } = options;
  const h = await createHarness(harnessOptions);
  let agentId: string | undefined;
  if (agent) {
    const created = await h.call('POST', '/agents', agent);
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    agentId = created.body.agentId;
  }
  const created = await h.call('POST', '/sessions', { ...(agentId ? { agentId } : {}), ...session });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return Object.assign(h, { sessionId: created.body.sessionId as string, agentId });
}

export async function newSession(h: Harness, body: Record<string, unknown> = {}): Promise<string> {
  const created = await h.call('POST', '/sessions', body);
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body.sessionId;
}

/** A session's cache key (Contract v2 `cache.key`): `ctxflow-` and the first 32 hex digits of the SHA-256 of its id. */
export function cacheKeyOf(sessionId: string): string {
  return `ctxflow-${createHash('sha256').update(sessionId).digest('hex').slice(0, 32)}`;
}

/** `POST /sessions/:id/steps`, expecting 200; returns the step answer. */
export async function step(h: Harness, sessionId: string, body: Record<string, unknown> = {}) {
  const answer = await h.call('POST', `/sessions/${sessionId}/steps`, body);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body as {
    stepId: string;
    mode: string;
    rows: Item[];
    request: {
      messages: { role: string; content: string; [field: string]: unknown }[];
      tools: Item[];
      activeTools: string[];
      system: string;
      model: string | null;
      toolChoice: unknown;
    };
    cursor: unknown;
    cache: { rebuilt: boolean; reason: string | null; key: string; prefixEnd: number; previousEnd: number };
    skipped: { reason: string; message: string }[];
  };
}

/** `POST /context`, expecting 200; returns `recorded`. */
export async function addContext(h: Harness, sessionId: string, items: Item[], key?: string): Promise<number> {
  const answer = await h.call('POST', '/context', { sessionId, items, ...(key === undefined ? {} : { key }) });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.recorded;
}

export async function message(h: Harness, sessionId: string, role: string, content: string, extra: Item = {}) {
  const answer = await h.call('POST', `/sessions/${sessionId}/messages`, { role, content, ...extra });
  expect(answer.status, JSON.stringify(answer.body)).toBe(201);
  return answer.body as { seq: number };
}

/** `POST /sessions/:id/tool-calls`: the tool gate's decision. */
export async function gate(h: Harness, sessionId: string, callId: string, name: string) {
  const answer = await h.call('POST', `/sessions/${sessionId}/tool-calls`, { callId, name });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body as { execute: boolean; reason?: string; client?: boolean; deadlineAt?: string };
}

/** A tool's (or hook's) `ctx.addContext` for one call. */
export async function callContext(
  h: Harness,
  sessionId: string,
  callId: string,
  items: Item[],
  extra: { origin?: 'tool' | 'hook'; site?: string } = {},
): Promise<number> {
  const answer = await h.call('POST', `/sessions/${sessionId}/tool-calls/${callId}/context`, { items, ...extra });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.recorded;
}

export interface Inspected {
  meta: Item;
  log: (
    | { type: 'message'; role: string; content: string; seq: number }
    | { type: 'row'; seq: number; stepId: string; row: Item }
  )[];
  queue: { itemId: string; item: Item; callId?: string }[];
  calls: { callId: string; name: string; status: string; reason?: string }[];
  steps: { stepId: string; ordinal: number; rowIds: string[]; logStart: number; logEnd: number }[];
  cursor: unknown;
  activeTools: string[];
}

/** The operator's view: log with rows, queue, calls, steps. */
export async function inspect(h: Harness, sessionId: string): Promise<Inspected> {
  const answer = await h.call('GET', `/sessions/${sessionId}/inspect`);
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body;
}

/** The rows of the log, in order. */
export function rowsOf(view: Inspected): Item[] {
  return view.log.flatMap((e) => (e.type === 'row' ? [e.row] : []));
}

/** What a refusal must leave untouched: log, queue, calls and steps. */
export async function state(h: Harness, sessionId: string) {
  const view = await inspect(h, sessionId);
  return { log: view.log, queue: view.queue, calls: view.calls, steps: view.steps, cursor: view.cursor };
}

export interface Chunk {
  event: string;
  data: Item;
}

/** `GET /sessions/:id/stream?follow=false`, parsed from its server-sent events text. */
export async function streamChunks(
  h: Harness,
  sessionId: string,
  headers: Record<string, string> = {},
): Promise<{ text: string; chunks: Chunk[] }> {
  const response = await h.app.inject({ method: 'GET', url: `/sessions/${sessionId}/stream?follow=false`, headers });
  expect(response.statusCode).toBe(200);
  expect(response.headers['content-type']).toMatch(/^text\/event-stream/);
  const chunks: Chunk[] = [];
  for (const block of response.body.split('\n\n')) {
    if (!block.trim()) continue;
    const lines = block.split('\n');
    const event = lines.find((l) => l.startsWith('event: '))?.slice(7) ?? 'message';
    const data = lines
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6))
      .join('\n');
    chunks.push({ event, data: JSON.parse(data) });
  }
  return { text: response.body, chunks };
}

/** An error answer in the shared format. */
export function expectError(
  answer: { status: number; body: any },
  status: number,
  code: string,
  retryable = false,
): void {
  expect(answer.status, JSON.stringify(answer.body)).toBe(status);
  expect(Object.keys(answer.body)).toEqual(['error']);
  expect(answer.body.error).toMatchObject({ code, message: expect.any(String), retryable });
}

/** The serialized messages array without its closing bracket: the prefix a later request must start with (R3). */
export function openPrefix(messages: unknown[]): string {
  return JSON.stringify(messages).slice(0, -1);
}

export const instruction = (content: string): Item => ({ kind: 'instruction', content });
export const notice = (content: string): Item => ({ kind: 'notice', content });
export const disableTools = (names: string[]): Item => ({ kind: 'tools', disable: names });
export const enableTools = (names: string[]): Item => ({ kind: 'tools', enable: names });
