/**
 * Bounded input, end to end: every number and id has a limit, the same in bodies and
 * paths; context blocks are bounded and merged in linear time; every refusal of the
 * server (routes, router, Node's HTTP parser) is in the error form; a late client answer
 * is cut to the row limit; error messages are capped. Each test checks the exact answer,
 * and that a refusal changed nothing.
 */
import { connect } from 'node:net';
import {
  errorCodes,
  MAX_CACHE_TTL_MS,
  MAX_CONTEXT_BLOCKS,
  MAX_CONTEXT_BODY_BYTES,
  MAX_CONTEXT_BYTES,
  MAX_DEADLINE_MS,
  MAX_ERROR_MESSAGE_LENGTH,
  MAX_ID_LENGTH,
  MAX_ITEM_BYTES,
} from '@ctxflow/contracts';
import { describe, expect, it, onTestFinished } from 'vitest';
import { mergeBlocks } from '../../services/session-runner/src/domain/context-blocks.ts';
import type { ContextBlock } from '../../services/session-runner/src/domain/model.ts';
import { expectError, inspect, openSession, rowsOf, state, step } from '../conformance/support.ts';
import { createHarness } from '../support/harness.ts';

const HUGE = Number.MAX_SAFE_INTEGER; // 9007199254740991

/** The error form, with a code of the registry. */
function expectErrorForm(answer: { status: number; body: any }, status: number, code: string) {
  expect(answer.status, JSON.stringify(answer.body)).toBe(status);
  expect(Object.keys(answer.body)).toEqual(['error']);
  expect(answer.body.error).toMatchObject({ code, message: expect.any(String), retryable: expect.any(Boolean) });
  expect(Object.keys(errorCodes)).toContain(answer.body.error.code);
  expect(answer.body.error.retryable).toBe(errorCodes[code as keyof typeof errorCodes].retryable);
}

describe('every number has a maximum', () => {
  it('a client tool deadlineMs of 9007199254740991 is a 400 validation_error naming the field, nothing created', async () => {
    const h = await createHarness();
    const tools = [{ name: 'ask_user', client: true, deadlineMs: HUGE }];
    const answer = await h.call('POST', '/agents', { tools });
    expectError(answer, 400, 'validation_error');
    expect(answer.body.error.message).toContain('tools.0.deadlineMs');
    const atLimit = await h.call('POST', '/agents', { tools: [{ ...tools[0], deadlineMs: MAX_DEADLINE_MS }] });
    expect(atLimit.status).toBe(201);
    const over = await h.call('POST', '/agents', { tools: [{ ...tools[0], deadlineMs: MAX_DEADLINE_MS + 1 }] });
    expectError(over, 400, 'validation_error');
  });

  it('cacheTtlMs, stepContext.maxBytes and stepContext.timeoutMs out of range are 400 validation_error naming the field', async () => {
    const h = await createHarness();
    for (const [body, field] of [
      [{ cacheTtlMs: HUGE }, 'cacheTtlMs'],
      [{ cacheTtlMs: MAX_CACHE_TTL_MS + 1 }, 'cacheTtlMs'],
      [{ stepContext: { maxBytes: HUGE } }, 'stepContext.maxBytes'],
      [{ stepContext: { timeoutMs: HUGE } }, 'stepContext.timeoutMs'],
      [{ tools: [{ name: 't', deadlineMs: 1e300 }] }, 'tools.0.deadlineMs'],
    ] as const) {
      const answer = await h.call('POST', '/agents', body);
      expectError(answer, 400, 'validation_error');
      expect(answer.body.error.message).toContain(field);
    }
    expect((await h.call('POST', '/agents', { cacheTtlMs: MAX_CACHE_TTL_MS })).status).toBe(201);
  });

  it('a tool gate for an agent stored with a huge deadline answers 200 with a valid deadline, the same on a retry', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'ask_user', client: true, deadlineMs: 1000 }] } });
    // An agent written before deadlines had a maximum.
    const agent = (await s.store.getAgent(s.agentId!))!;
    const old = { ...agent, tools: agent.tools.map((t) => (t.name === 'ask_user' ? { ...t, deadlineMs: HUGE } : t)) };
    expect(await s.store.replaceAgent({ ...old, version: agent.version + 1 }, agent.version)).toBe(true);
    const first = await s.call('POST', `/sessions/${s.sessionId}/tool-calls`, { callId: 'c1', name: 'ask_user' });
    expect(first).toEqual({
      status: 200,
      body: { execute: true, client: true, deadlineAt: new Date(s.clock.now() + MAX_DEADLINE_MS).toISOString() },
    });
    const retry = await s.call('POST', `/sessions/${s.sessionId}/tool-calls`, { callId: 'c1', name: 'ask_user' });
    expect(retry).toEqual(first);
  });

  it('a call record stored with a deadline past the last Date still answers 200 (no 500 that never clears)', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'ask_user', client: true }] } });
    expect(
      await s.store.putCall(s.sessionId, {
        callId: 'c1',
        name: 'ask_user',
        stepIndex: 0,
        status: 'awaiting_client',
        deadlineAt: HUGE * 2,
      }),
    ).toBeDefined();
    const answer = await s.call('POST', `/sessions/${s.sessionId}/tool-calls`, { callId: 'c1', name: 'ask_user' });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body).toEqual({ execute: true, client: true, deadlineAt: '+275760-09-13T00:00:00.000Z' });
  });
});

describe('context blocks are bounded and merged in linear time', () => {
  /** Blocks whose `id` reads are counted. */
  function countedBlocks(count: number, prefix: string, reads: { n: number }): ContextBlock[] {
    return Array.from({ length: count }, (_, i) => {
      const id = `${prefix}${i}`;
      const block = { content: 'c' } as ContextBlock;
      Object.defineProperty(block, 'id', {
        enumerable: true,
        get() {
          reads.n += 1;
          return id;
        },
      });
      return block;
    });
  }

  it('merging the largest allowed input reads each block id a bounded number of times (linear, not quadratic)', () => {
    const reads = { n: 0 };
    const half = MAX_CONTEXT_BLOCKS / 2;
    // Half the blocks replaced, half appended: every lookup kind is exercised.
    const current = countedBlocks(half, 'a', reads);
    const update = [...countedBlocks(half / 2, 'a', reads), ...countedBlocks(half / 2, 'b', reads)];
    const merged = mergeBlocks(current, update);
    expect(merged).toHaveLength(half + half / 2);
    expect(merged.map((b) => b.id).slice(0, 2)).toEqual(['a0', 'a1']);
    expect(merged.at(-1)!.id).toBe(`b${half / 2 - 1}`);
    // A scan per update block reads about |current| * |update| ids (125,000 here).
    expect(reads.n).toBeLessThanOrEqual(8 * (current.length + update.length));
  });

  it('PATCH /agents/:id and PATCH /sessions/:id with more than the maximum blocks are 400 and change nothing', async () => {
    const s = await openSession({ agent: { context: [{ id: 'base', content: 'You help.' }] } });
    const tooMany = Array.from({ length: MAX_CONTEXT_BLOCKS + 1 }, (_, i) => ({ id: `b${i}`, content: 'x' }));
    const agentBefore = (await s.call('GET', `/agents/${s.agentId}`)).body;
    expectError(await s.call('PATCH', `/agents/${s.agentId}`, { context: tooMany }), 400, 'validation_error');
    expect((await s.call('GET', `/agents/${s.agentId}`)).body).toEqual(agentBefore);
    const sessionBefore = (await inspect(s, s.sessionId)).meta;
    expectError(await s.call('PATCH', `/sessions/${s.sessionId}`, { context: tooMany }), 400, 'validation_error');
    expect((await inspect(s, s.sessionId)).meta).toEqual(sessionBefore);
    // The maximum itself is accepted.
    const max = tooMany.slice(0, MAX_CONTEXT_BLOCKS - 1);
    expect((await s.call('PATCH', `/agents/${s.agentId}`, { context: max })).status).toBe(200);
    // A merge that would pass the maximum is refused too, and changes nothing.
    const afterMax = (await s.call('GET', `/agents/${s.agentId}`)).body;
    expect(afterMax.context).toHaveLength(MAX_CONTEXT_BLOCKS);
    const more = await s.call('PATCH', `/agents/${s.agentId}`, { context: [{ id: 'one-more', content: 'x' }] });
    expectError(more, 400, 'validation_error');
    expect(more.body.error.message).toContain(`${MAX_CONTEXT_BLOCKS + 1} blocks`);
    expect((await s.call('GET', `/agents/${s.agentId}`)).body).toEqual(afterMax);
  });

  it('a context body past twice the context limit is 413 before it is parsed, and changes nothing', async () => {
    const s = await openSession({ agent: { context: 'You help.' } });
    // 100,000 blocks (about 3 MB): refused by its size, not parsed and merged.
    const blocks = Array.from({ length: 100_000 }, (_, i) => ({ id: `b${i}`, content: 'x'.repeat(8) }));
    expect(Buffer.byteLength(JSON.stringify({ context: blocks }))).toBeGreaterThan(MAX_CONTEXT_BODY_BYTES);
    const agentBefore = (await s.call('GET', `/agents/${s.agentId}`)).body;
    const sessionBefore = (await inspect(s, s.sessionId)).meta;
    for (const [method, url] of [
      ['PATCH', `/agents/${s.agentId}`],
      ['POST', '/sessions'],
      ['PATCH', `/sessions/${s.sessionId}`],
    ] as const) {
      expectError(await s.call(method, url, { context: blocks }), 413, 'payload_too_large');
    }
    expect((await s.call('GET', `/agents/${s.agentId}`)).body).toEqual(agentBefore);
    expect((await inspect(s, s.sessionId)).meta).toEqual(sessionBefore);
    expect((await s.call('GET', '/sessions')).body.sessions).toHaveLength(1);
  });

  it('context over the byte limit is 400 on every route that takes it, and changes nothing', async () => {
    const s = await openSession({ agent: { context: 'You help.' } });
    const big = 'x'.repeat(MAX_CONTEXT_BYTES + 1);
    const agentBefore = (await s.call('GET', `/agents/${s.agentId}`)).body;
    const sessionBefore = (await inspect(s, s.sessionId)).meta;
    for (const [method, url] of [
      ['POST', '/agents'],
      ['POST', '/sessions'],
      ['PATCH', `/agents/${s.agentId}`],
      ['PATCH', `/sessions/${s.sessionId}`],
    ] as const) {
      const answer = await s.call(method, url, { context: big });
      expectError(answer, 400, 'validation_error');
      expect(answer.body.error.message).toContain(`${MAX_CONTEXT_BYTES}-byte limit`);
    }
    expect((await s.call('GET', `/agents/${s.agentId}`)).body).toEqual(agentBefore);
    expect((await inspect(s, s.sessionId)).meta).toEqual(sessionBefore);
    expect((await s.call('GET', '/sessions')).body.sessions).toHaveLength(1);
  });
});

describe('one id limit in bodies and paths', () => {
  it('a callId of the maximum length is accepted by the gate and reachable for approval, answer and call context', async () => {
    const s = await openSession({
      agent: {
        tools: [{ name: 'ask_user', client: true }, { name: 'deploy', needsApproval: true }, { name: 'search' }],
      },
    });
    const id = (c: string) => c.repeat(MAX_ID_LENGTH);
    const path = (callId: string, what: string) => `/sessions/${s.sessionId}/tool-calls/${callId}/${what}`;
    expect(
      (await s.call('POST', `/sessions/${s.sessionId}/tool-calls`, { callId: id('a'), name: 'ask_user' })).status,
    ).toBe(200);
    expect((await s.call('POST', path(id('a'), 'answer'), { content: 'yes' })).body).toEqual({
      late: false,
      recorded: 1,
    });
    expect(
      (await s.call('POST', `/sessions/${s.sessionId}/tool-calls`, { callId: id('d'), name: 'deploy' })).status,
    ).toBe(200);
    expect((await s.call('POST', path(id('d'), 'approval'), { approved: true })).body).toEqual({ execute: true });
    expect(
      (await s.call('POST', `/sessions/${s.sessionId}/tool-calls`, { callId: id('s'), name: 'search' })).status,
    ).toBe(200);
    const context = await s.call('POST', path(id('s'), 'context'), { items: [{ kind: 'notice', content: 'n' }] });
    expect(context).toEqual({ status: 200, body: { recorded: 1 } });
    // Non-ASCII ids count in characters, in a body and (percent-encoded) in a path alike.
    const wide = 'é'.repeat(MAX_ID_LENGTH);
    expect((await s.call('POST', `/sessions/${s.sessionId}/tool-calls`, { callId: wide, name: 'search' })).status).toBe(
      200,
    );
    const encoded = await s.call('POST', path(encodeURIComponent(wide), 'context'), {
      items: [{ kind: 'notice', content: 'w' }],
    });
    expect(encoded).toEqual({ status: 200, body: { recorded: 1 } });
  });

  it('an id one character over the limit is a 400 validation_error in a body and in a path alike, nothing written', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'search' }] } });
    const long = 'a'.repeat(MAX_ID_LENGTH + 1);
    const before = await state(s, s.sessionId);
    for (const [url, body] of [
      [`/sessions/${s.sessionId}/tool-calls`, { callId: long, name: 'search' }],
      [`/sessions/${s.sessionId}/tool-calls/${long}/answer`, { content: 'x' }],
      [`/sessions/${s.sessionId}/tool-calls/${long}/approval`, { approved: true }],
      [`/sessions/${s.sessionId}/tool-calls/${long}/context`, { items: [{ kind: 'notice', content: 'x' }] }],
      [`/sessions/${long}/steps`, {}],
      [`/sessions/${s.sessionId}/messages`, { role: 'tool', content: 'x', callId: long }],
      [`/sessions/${s.sessionId}/rewind`, { toStepId: long }],
      [`/sessions/${s.sessionId}/rewind`, { beforeStepId: long }],
      [`/sessions/${s.sessionId}/branches`, { atStepId: long }],
      [`/sessions/${s.sessionId}/steps`, { requestId: long }],
      [`/sessions/${s.sessionId}/runs/restart`, { requestId: long }],
      ['/context', { sessionId: long, items: [{ kind: 'notice', content: 'x' }] }],
      ['/context', { sessionId: s.sessionId, items: [{ kind: 'notice', content: 'x' }], key: long }],
      ['/sessions', { agentId: long }],
      ['/agents', { context: [{ id: long, content: 'x' }] }],
    ] as const) {
      const answer = await s.call('POST', url, body);
      expectError(answer, 400, 'validation_error');
      expect(answer.body.error.message).not.toContain(long);
    }
    expectError(await s.call('GET', `/agents/${long}`), 400, 'validation_error');
    expect(await state(s, s.sessionId)).toEqual(before);
  });
});

describe('every answer of the server is in the error form', () => {
  it('a bad %-escape, a too-long path parameter and an unknown route answer in the error form, without the path', async () => {
    const h = await createHarness();
    const marker = 'MARKER';
    for (const [url, status, code] of [
      [`/sessions/%E0%A4%A/${marker}`, 400, 'validation_error'],
      [`/sessions/${marker}%ZZ/steps`, 400, 'validation_error'],
      [`/sessions/${marker}${'x'.repeat(MAX_ID_LENGTH)}/steps`, 400, 'validation_error'],
      [`/no-such-route/${marker}`, 404, 'not_found'],
      [`/${marker}${'%F0%9F%98%80'.repeat(500)}`, 404, 'not_found'],
    ] as const) {
      const answer = await h.call('POST', url, {});
      expectErrorForm(answer, status, code);
      expect(JSON.stringify(answer.body)).not.toContain(marker);
    }
  });

  it('headers over the server limit answer 431 header_too_large in the error form (Node refuses before fastify)', async () => {
    const h = await createHarness();
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    onTestFinished(() => h.app.close());
    const { port } = h.app.server.address() as { port: number };
    const raw = await rawRequest(port, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`);
    const [head, body] = raw.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 431 /);
    expectErrorForm({ status: 431, body: JSON.parse(body!) }, 431, 'header_too_large');
    const garbage = await rawRequest(port, 'NOT A REQUEST\r\n\r\n');
    expect(garbage).toMatch(/^HTTP\/1\.1 400 /);
    expectErrorForm({ status: 400, body: JSON.parse(garbage.split('\r\n\r\n')[1]!) }, 400, 'validation_error');
  });
});

describe('late answers, echoed input and id limits', () => {
  it('a late client answer over the row limit is cut to fit, with a notice of what was left out, not refused', async () => {
    const s = await openSession({ agent: { tools: [{ name: 'ask_user', client: true, deadlineMs: 1000 }] } });
    await s.call('POST', `/sessions/${s.sessionId}/tool-calls`, { callId: 'c1', name: 'ask_user' });
    s.clock.advance(1001);
    const content = `${'"quoted" é '.repeat(10_000)}END`;
    const answer = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c1/answer`, { content });
    expect(answer).toEqual({ status: 200, body: { late: true, recorded: 1 } });
    const next = await step(s, s.sessionId);
    expect(next.rows).toHaveLength(1);
    const row = next.rows[0]!;
    expect(row).toMatchObject({ role: 'context', kind: 'notice', source: 'late-answer' });
    const text = row.content as string;
    expect(text.startsWith('Late answer from tool ask_user (call c1), after its deadline:\n"quoted" é ')).toBe(true);
    const leftOut = /\n\[(\d+) more characters of this answer left out: it was over the (\d+)-byte row limit\]$/.exec(
      text,
    );
    expect(leftOut).not.toBeNull();
    expect(Number(leftOut![2])).toBe(MAX_ITEM_BYTES);
    const kept = text.slice(text.indexOf('\n') + 1, leftOut!.index);
    expect(content.startsWith(kept)).toBe(true);
    expect(kept.length + Number(leftOut![1])).toBe(content.length);
    expect(Buffer.byteLength(JSON.stringify({ kind: 'notice', content: text }))).toBeLessThanOrEqual(MAX_ITEM_BYTES);
    expect(rowsOf(await inspect(s, s.sessionId))).toEqual(next.rows);
  });

  it('a body with 100,000 unknown keys gets a short error, message and details bounded', async () => {
    const h = await createHarness();
    const body: Record<string, string> = {};
    for (let i = 0; i < 100_000; i++) body[`unknown_key_${i}`] = 'v';
    const answer = await h.call('POST', '/agents', body);
    expectError(answer, 400, 'validation_error');
    expect(answer.body.error.message.length).toBeLessThanOrEqual(MAX_ERROR_MESSAGE_LENGTH);
    expect(JSON.stringify(answer.body).length).toBeLessThan(16 * 1024);
    // An unknown kind of 1 MiB is not echoed either.
    const s = await openSession();
    const kind = await s.call('POST', '/context', {
      sessionId: s.sessionId,
      items: [{ kind: 'k'.repeat(1024 * 1024) }],
    });
    expectError(kind, 400, 'validation_error');
    expect(JSON.stringify(kind.body).length).toBeLessThan(16 * 1024);
  });

  it('toStepId, agentId and sessionId over the id limit are 400 validation_error naming the field', async () => {
    const s = await openSession();
    const long = 'x'.repeat(257);
    for (const [url, body, field] of [
      [`/sessions/${s.sessionId}/rewind`, { toStepId: long }, 'toStepId'],
      ['/sessions', { agentId: long }, 'agentId'],
      ['/context', { sessionId: long, items: [{ kind: 'notice', content: 'x' }] }, 'sessionId'],
    ] as const) {
      const answer = await s.call('POST', url, body);
      expectError(answer, 400, 'validation_error');
      expect(answer.body.error.message).toContain(field);
    }
  });
});

/** Sends raw bytes over one connection and reads until the server closes it. */
async function rawRequest(port: number, text: string): Promise<string> {
  const socket = connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.on('error', () => {}); // a reset after the answer is not the test's concern
  const closed = new Promise((resolve) => socket.on('close', resolve));
  socket.write(text);
  await closed;
  return Buffer.concat(chunks).toString('utf8');
}
