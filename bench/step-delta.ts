/**
 * The step answer as a delta (`since`) against the full answer, and what a step costs as the log
 * grows. Run alone: `node bench/step-delta.ts [steps]` (default 1,000); prints JSON.
 *
 * - answer bytes: a session of `steps` steps (each a user message and an assistant answer, a
 *   notice every 3rd step, a tool call with its result every 4th), each step asked with `since`
 *   = the messages the runtime holds; the same step's full answer (its request id again, without
 *   `since`) is measured too. Bytes are the answer's JSON (what the HTTP route sends). The delta
 *   appended to what the runtime held is checked to equal the full request.
 * - CPU per step: sessions whose request has about 10 and about 1,000 messages, 300 steps each
 *   (nothing new between them, so the log keeps its length), with and without `since` (engine
 *   step and the answer's JSON, no HTTP). And the neutral messages' rendering alone
 *   (renderNeutralRequest) of a log one entry longer than a rendered one, walking the whole log
 *   and walking the new entry only (what a step does), at both sizes.
 */
import { createEngine, type LogEntry } from '@ctxflow/session-runner';
import { NeutralWalk, renderNeutralRequest } from '../services/session-runner/src/domain/neutral-request.ts';
import { cpuMs } from './lib/cpu.ts';
import { round } from './lib/stats.ts';

const TENANT = 'default';
const steps = Number(process.argv[2] ?? 1_000);
const engine = createEngine({});
const agent = await engine.createAgent(TENANT, {
  context: 'You are the support desk agent of Example Corp. Answer tickets precisely, cite the ticket.',
  model: 'gpt-test',
  tools: [{ name: 'search', description: 'Search tickets.', parameters: { type: 'object', properties: {} } }],
});

async function turn(sessionId: string, i: number) {
  await engine.appendMessages(TENANT, sessionId, [
    { role: 'user', content: `Question ${i}: why is ticket ${i} open?` },
  ]);
  if (i % 3 === 0) {
    await engine.addContext(TENANT, { sessionId, items: [{ kind: 'notice', content: `Ticket ${i} was updated.` }] });
  }
  if (i % 4 === 1) {
    await engine.appendMessages(TENANT, sessionId, [
      { role: 'assistant', content: '', toolCalls: [{ callId: `c${i}`, name: 'search', arguments: '{"q":"x"}' }] },
      { role: 'tool', content: `Found ticket ${i}: status open, owner Ann.`, callId: `c${i}` },
    ]);
  }
}

// 1. Answer bytes over a session of `steps` steps.
const { sessionId } = await engine.createSession(TENANT, { agentId: agent.agentId });
let held: unknown[] = [];
let fullBytes = 0;
let deltaBytes = 0;
let lastFull = 0;
let lastDelta = 0;
for (let i = 0; i < steps; i++) {
  await turn(sessionId, i);
  const delta = await engine.step(TENANT, sessionId, { requestId: `r${i}`, since: held.length });
  const full = await engine.step(TENANT, sessionId, { requestId: `r${i}` });
  held = held.concat(delta.request.messages);
  if (JSON.stringify(held) !== JSON.stringify(full.request.messages)) throw new Error(`step ${i}: delta differs`);
  lastDelta = Buffer.byteLength(JSON.stringify(delta));
  lastFull = Buffer.byteLength(JSON.stringify(full));
  deltaBytes += lastDelta;
  fullBytes += lastFull;
  await engine.appendMessages(TENANT, sessionId, [{ role: 'assistant', content: `Answer ${i}: it waits for Ann.` }]);
}

// 2. CPU per step at about 10 and about 1,000 messages.
async function sessionOf(turns: number): Promise<string> {
  const { sessionId: id } = await engine.createSession(TENANT, { agentId: agent.agentId });
  for (let i = 0; i < turns; i++) {
    await turn(id, i);
    await engine.appendMessages(TENANT, id, [{ role: 'assistant', content: `Answer ${i}.` }]);
  }
  return id;
}

/** CPU per step on a session whose log does not grow: steps with nothing new (the step record alone commits). */
async function cpuPerStep(id: string, since: boolean, count = 300) {
  const holding = (await engine.step(TENANT, id, {})).request.messages.length;
  const before = process.cpuUsage();
  let bytes = 0;
  for (let i = 0; i < count; i++) {
    const answer = await engine.step(TENANT, id, since ? { since: holding } : {});
    bytes = Buffer.byteLength(JSON.stringify(answer));
  }
  return { messages: holding, cpuMsPerStep: round(cpuMs(before) / count, 3), answerBytes: bytes };
}

/** The neutral messages of a log one entry longer than a rendered one: walked whole, and from the rendered one. */
async function renderMs(id: string, count = 300) {
  const inspected = await engine.inspect(TENANT, id);
  const entries = inspected.log as unknown as LogEntry[];
  const render = (walk: NeutralWalk) =>
    renderNeutralRequest({ system: 'x', walk, tools: [], activeTools: [], model: undefined, forced: false });
  const rendered = NeutralWalk.of(entries);
  render(rendered);
  const timed = (base: boolean) => {
    const before = process.cpuUsage();
    for (let i = 0; i < count; i++) {
      const next: LogEntry = { type: 'message', seq: entries.length, role: 'user', content: `m${i}`, at: '' };
      render(base ? rendered.extend([next]) : NeutralWalk.of(entries.concat(next)));
    }
    return round(cpuMs(before) / count, 4);
  };
  return { entries: entries.length, wholeLogMs: timed(false), newEntryOnlyMs: timed(true) };
}

const small = await sessionOf(3);
const large = await sessionOf(350);
const result = {
  steps,
  answerBytes: {
    full: fullBytes,
    delta: deltaBytes,
    ratio: round(fullBytes / deltaBytes, 1),
    lastStepFull: lastFull,
    lastStepDelta: lastDelta,
    messagesAtEnd: held.length,
  },
  cpuPerStep: {
    '~10 messages, full': await cpuPerStep(small, false),
    '~10 messages, delta': await cpuPerStep(small, true),
    '~1,000 messages, full': await cpuPerStep(large, false),
    '~1,000 messages, delta': await cpuPerStep(large, true),
  },
  neutralRenderOnly: { small: await renderMs(small), large: await renderMs(large) },
};
process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
