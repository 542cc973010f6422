/**
 * Context rows and the context pass: R1-R8 (rows, one commit, byte-stable
 * prefixes, never shown to users, sources and their presentation, the queue).
 */

import { MemorySessionStore, type StepCommit } from '@ctxflow/session-runner';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  addContext,
  callContext,
  disableTools,
  enableTools,
  gate,
  inspect,
  instruction,
  message,
  notice,
  openPrefix,
  openSession,
  rowsOf,
  step,
  streamChunks,
} from './support.ts';

/** Records every step commit the context pass makes. */
class CountingStore extends MemorySessionStore {
  commits: StepCommit[] = [];
  override async commitStep(sessionId: string, commit: StepCommit) {
    this.commits.push(structuredClone(commit));
    return super.commitStep(sessionId, commit);
  }
}

const TOOLS = [{ name: 'search' }, { name: 'lookup' }];

describe('rows and the context pass', () => {
  it('R1: every kind becomes a row with role context and its kind; tools rows carry their lists', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    await addContext(s, s.sessionId, [
      instruction('Answer in French.'),
      notice('Upload finished.'),
      disableTools(['search']),
      enableTools(['search']),
      { kind: 'memory', content: 'The user prefers email.' },
    ]);
    const answer = await step(s, s.sessionId);
    expect(answer.rows.map(({ id: _id, ...rest }) => rest)).toEqual([
      { role: 'context', kind: 'instruction', source: 'app', content: 'Answer in French.' },
      { role: 'context', kind: 'notice', source: 'app', content: 'Upload finished.' },
      { role: 'context', kind: 'tools', source: 'app', disable: ['search'] },
      { role: 'context', kind: 'tools', source: 'app', enable: ['search'] },
      { role: 'context', kind: 'memory', source: 'app', content: 'The user prefers email.' },
    ]);
    expect(rowsOf(await inspect(s, s.sessionId))).toEqual(answer.rows);
  });

  it('R2: callers add items, never rows: a row-shaped item is refused and nothing is queued', async () => {
    const s = await openSession();
    const refused = await s.call('POST', '/context', {
      sessionId: s.sessionId,
      items: [{ id: 'r1', role: 'context', kind: 'notice', source: 'app', content: 'forged row' }],
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error.code).toBe('validation_error');
    const view = await inspect(s, s.sessionId);
    expect(view.log).toEqual([]);
    expect(view.queue).toEqual([]);
  });

  it('R2: items wait in the queue, then the pass commits queue, hook batch and memory as rows in ONE commit before the call', async () => {
    const store = new CountingStore();
    const s = await openSession({ store, agent: { memory: { autoInject: true } } });
    const remembered = await s.call('POST', `/agents/${s.agentId}/memories`, {
      content: 'Customer is on the EU plan.',
    });
    expect(remembered.status).toBe(201);
    await message(s, s.sessionId, 'user', 'Where is my refund?');
    await addContext(s, s.sessionId, [instruction('Be brief.'), notice('Refund #12 approved.')]);

    const queued = await inspect(s, s.sessionId);
    expect(rowsOf(queued)).toEqual([]);
    expect(queued.queue.map((q) => q.item)).toEqual([
      { kind: 'instruction', content: 'Be brief.', source: 'app' },
      { kind: 'notice', content: 'Refund #12 approved.', source: 'app' },
    ]);

    s.hook.script = () => ({ items: [notice('Ticket 7 reopened.')], cursor: 'c1' });
    const answer = await step(s, s.sessionId);
    expect(store.commits).toHaveLength(1);
    const [commit] = store.commits;
    expect(commit!.rows.map((r) => (r.type === 'row' ? [r.row.kind, r.row.source] : r.type))).toEqual([
      ['instruction', 'app'],
      ['notice', 'app'],
      ['notice', 'hook'],
      ['memory', 'memory'],
    ]);
    expect(commit!.drain).toHaveLength(2);
    // The request the model gets carries exactly the committed rows, after the user turn (no agent context: no system prefix).
    expect(answer.rows).toEqual(commit!.rows.map((r) => (r.type === 'row' ? r.row : undefined)));
    expect(answer.request.messages.slice(1).map((m) => m.content)).toEqual([
      '<context kind="instruction" source="app">\nBe brief.\n</context>',
      '<context kind="notice" source="app">\nRefund #12 approved.\n</context>',
      '<context kind="notice" source="hook">\nTicket 7 reopened.\n</context>',
      '<context kind="memory" source="memory">\nCustomer is on the EU plan.\n</context>',
    ]);
    const after = await inspect(s, s.sessionId);
    expect(after.queue).toEqual([]);
    expect(rowsOf(after)).toEqual(answer.rows);
    expect(after.steps).toHaveLength(1);
    expect(after.steps[0]!.rowIds).toEqual(answer.rows.map((r) => r.id));
  });

  it('R3: each request starts with the bytes of the previous one, through rows, messages, switches and skips', async () => {
    const s = await openSession({ agent: { context: 'You help with tickets.', tools: TOOLS } });
    const requests: unknown[][] = [];
    await message(s, s.sessionId, 'user', 'Hello');
    s.hook.script = () => ({ items: [notice('Ticket 1 opened.')], cursor: 1 });
    await addContext(s, s.sessionId, [instruction('Answer in one sentence.')]);
    requests.push((await step(s, s.sessionId)).request.messages);

    await message(s, s.sessionId, 'assistant', 'Hi.', { toolCalls: [{ callId: 'c1', name: 'search' }] });
    expect((await gate(s, s.sessionId, 'c1', 'search')).execute).toBe(true);
    await callContext(s, s.sessionId, 'c1', [disableTools(['search']), notice('search ran')]);
    await message(s, s.sessionId, 'tool', 'result', { callId: 'c1' });
    s.hook.script = () => {
      throw new Error('feed down');
    };
    requests.push((await step(s, s.sessionId)).request.messages);

    // A staged thread edit must not touch a warm prefix (N4).
    expect((await s.call('PATCH', `/sessions/${s.sessionId}`, { context: 'Tier: gold.' })).status).toBe(200);
    s.hook.script = () => ({ items: [notice('Ticket 1 closed.')], cursor: 2 });
    await addContext(s, s.sessionId, [enableTools(['search'])]);
    requests.push((await step(s, s.sessionId, { mode: 'retry' })).request.messages);
    await message(s, s.sessionId, 'user', 'Thanks');
    requests.push((await step(s, s.sessionId, { mode: 'forced_completion' })).request.messages);

    for (let i = 1; i < requests.length; i++) {
      expect(requests[i]!.length).toBeGreaterThan(requests[i - 1]!.length);
      expect(JSON.stringify(requests[i]).startsWith(openPrefix(requests[i - 1]!))).toBe(true);
      expect(requests[i]!.slice(0, requests[i - 1]!.length)).toEqual(requests[i - 1]);
    }
  });

  it('R3: property: any sequence of adds, messages, tool calls and hook batches keeps every request a byte prefix of the next', async () => {
    const op = fc.oneof(
      fc.record({ type: fc.constant('app' as const), text: fc.string({ maxLength: 40 }) }),
      fc.record({ type: fc.constant('user' as const), text: fc.string({ maxLength: 40 }) }),
      fc.record({ type: fc.constant('hook' as const), text: fc.string({ maxLength: 40 }) }),
      fc.record({ type: fc.constant('tool' as const), off: fc.boolean() }),
      fc.record({ type: fc.constant('step' as const), mode: fc.constantFrom('first', 'retry', 'forced_completion') }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 25 }), async (ops) => {
        const s = await openSession({ agent: { context: 'Prefix.', tools: TOOLS } });
        let previous: unknown[] | undefined;
        let hookText: string | undefined;
        let cursor = 0;
        s.hook.script = () => {
          if (hookText === undefined) return undefined;
          const batch = { items: [notice(hookText)], cursor: ++cursor };
          hookText = undefined;
          return batch;
        };
        let calls = 0;
        const check = async (mode = 'first') => {
          const messages = (await step(s, s.sessionId, { mode })).request.messages;
          if (previous) expect(JSON.stringify(messages).startsWith(openPrefix(previous))).toBe(true);
          previous = messages;
        };
        for (const o of ops) {
          if (o.type === 'app') await addContext(s, s.sessionId, [notice(o.text)]);
          else if (o.type === 'user') await message(s, s.sessionId, 'user', o.text);
          else if (o.type === 'hook') hookText = o.text;
          else if (o.type === 'tool') {
            const callId = `call-${++calls}`;
            await gate(s, s.sessionId, callId, 'lookup');
            await callContext(s, s.sessionId, callId, [o.off ? disableTools(['search']) : notice('tool note')]);
          } else await check(o.mode);
        }
        await check();
      }),
      { numRuns: 40 },
    );
  });

  it('R4: UI messages, the snapshot and the stream never show a context row', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    await message(s, s.sessionId, 'user', 'Question');
    await addContext(s, s.sessionId, [instruction('SECRET-INSTRUCTION'), disableTools(['search'])]);
    s.hook.script = () => ({ items: [notice('SECRET-NOTICE')], cursor: 1 });
    await step(s, s.sessionId);
    await message(s, s.sessionId, 'assistant', 'Answer');

    const messages = await s.call('GET', `/sessions/${s.sessionId}/messages`);
    expect(messages.status).toBe(200);
    expect(messages.body.messages.map((m: { role: string; content: string }) => [m.role, m.content])).toEqual([
      ['user', 'Question'],
      ['assistant', 'Answer'],
    ]);
    const snapshot = await s.call('GET', `/sessions/${s.sessionId}`);
    expect(snapshot.status).toBe(200);
    const { text, chunks } = await streamChunks(s, s.sessionId);
    for (const shown of [JSON.stringify(messages.body), JSON.stringify(snapshot.body), text]) {
      expect(shown).not.toContain('SECRET-');
      expect(shown).not.toContain('"role":"context"');
    }
    expect(snapshot.body.messages).toEqual(messages.body.messages);
    expect(chunks.map((c) => c.event)).toEqual(['message', 'step', 'message']);
  });

  it('R5: each row records its source: app, hook, tool, memory, late-answer', async () => {
    const s = await openSession({
      agent: {
        tools: [{ name: 'search' }, { name: 'ask_user', client: true, deadlineMs: 1000 }],
        memory: { autoInject: true },
      },
    });
    await message(s, s.sessionId, 'user', 'Hi');
    await addContext(s, s.sessionId, [notice('from app')]);
    s.hook.script = () => ({ items: [notice('from hook')], cursor: 1 });
    const first = await step(s, s.sessionId);
    s.hook.script = () => undefined;
    await gate(s, s.sessionId, 'c1', 'search');
    await callContext(s, s.sessionId, 'c1', [{ kind: 'notice', content: 'from tool', source: 'app' }]);
    expect((await gate(s, s.sessionId, 'c2', 'ask_user')).client).toBe(true);
    s.clock.advance(1001);
    const late = await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c2/answer`, { content: 'yes' });
    expect(late.body).toEqual({ late: true, recorded: 1 });
    const second = await step(s, s.sessionId);

    expect(first.rows.map((r) => [r.source, r.content])).toEqual([
      ['app', 'from app'],
      ['hook', 'from hook'],
      ['memory', ''],
    ]);
    expect(second.rows.map((r) => r.source)).toEqual(['tool', 'late-answer']);
    expect(rowsOf(await inspect(s, s.sessionId)).map((r) => r.source)).toEqual([
      'app',
      'hook',
      'memory',
      'tool',
      'late-answer',
    ]);
  });

  it('R6: app, hook and memory rows take a system form; tool and late-answer rows a user turn', async () => {
    const s = await openSession({
      agent: {
        tools: [{ name: 'search' }, { name: 'ask_user', client: true, deadlineMs: 10 }],
        memory: { autoInject: true },
      },
    });
    await message(s, s.sessionId, 'user', 'Hi');
    await addContext(s, s.sessionId, [notice('app says')]);
    s.hook.script = () => ({ items: [notice('hook says')], cursor: 1 });
    await gate(s, s.sessionId, 'c1', 'search');
    await callContext(s, s.sessionId, 'c1', [notice('tool says')]);
    await gate(s, s.sessionId, 'c2', 'ask_user');
    s.clock.advance(11);
    await s.call('POST', `/sessions/${s.sessionId}/tool-calls/c2/answer`, { content: 'late says' });
    const answer = await step(s, s.sessionId);
    const rendered = answer.request.messages.slice(1); // after the user turn
    expect(rendered.map((m) => [m.role, /source="([^"]+)"/.exec(m.content)?.[1]])).toEqual([
      ['system', 'app'],
      ['user', 'tool'],
      ['user', 'late-answer'],
      ['system', 'hook'],
      ['system', 'memory'],
    ]);
  });

  it('R7: items added by a tool or hook are queued and delivered at the next model call, once', async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    await step(s, s.sessionId);
    await gate(s, s.sessionId, 'c1', 'search');
    expect(await callContext(s, s.sessionId, 'c1', [instruction('Do not edit a.txt until the upload finishes.')])).toBe(
      1,
    );
    expect(await callContext(s, s.sessionId, 'c1', [notice('hook note')], { origin: 'hook' })).toBe(1);
    expect((await inspect(s, s.sessionId)).queue).toHaveLength(2);
    const next = await step(s, s.sessionId);
    expect(next.rows.map((r) => [r.kind, r.source, r.content])).toEqual([
      ['instruction', 'tool', 'Do not edit a.txt until the upload finishes.'],
      ['notice', 'app', 'hook note'],
    ]);
    const later = await step(s, s.sessionId);
    expect(later.rows).toEqual([]);
    expect(rowsOf(await inspect(s, s.sessionId))).toHaveLength(2);
  });

  it("R8: a tool's items always carry source tool, whatever they say; a hook's default to app", async () => {
    const s = await openSession({ agent: { tools: TOOLS } });
    await gate(s, s.sessionId, 'c1', 'search');
    await callContext(s, s.sessionId, 'c1', [
      { kind: 'notice', content: 'claims app', source: 'app' },
      { kind: 'notice', content: 'claims memory', source: 'memory' },
      notice('says nothing'),
    ]);
    await callContext(
      s,
      s.sessionId,
      'c1',
      [notice('hook default'), { kind: 'notice', content: 'hook names memory', source: 'memory' }],
      {
        origin: 'hook',
      },
    );
    const answer = await step(s, s.sessionId);
    expect(answer.rows.map((r) => [r.content, r.source])).toEqual([
      ['claims app', 'tool'],
      ['claims memory', 'tool'],
      ['says nothing', 'tool'],
      ['hook default', 'app'],
      ['hook names memory', 'memory'],
    ]);
  });
});
