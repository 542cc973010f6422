/**
 * The walkthrough on the typescript-fetch client generated from the served /openapi.json (into
 * ./client beside this file, compiled with it by tsc): every answer read through the client's
 * own types and converters. Usage: node walkthrough.js <server url> <api key> [configured source]
 * Prints one line per step and a last summary line; exits 1 with the first mismatch.
 */
import {
  AgentsApi,
  Configuration,
  type ConflictError,
  ConflictErrorBodyCodeEnum,
  ConflictErrorFromJSON,
  ContextApi,
  type ContextItem,
  MessagesApi,
  type NotFoundError,
  NotFoundErrorBodyCodeEnum,
  NotFoundErrorFromJSON,
  ResponseError,
  SessionsApi,
  StepsApi,
  SubscriptionsApi,
  ToolCallsApi,
  ToolDecisionReasonEnum,
} from './client/index.js';

const [url, apiKey, customSource] = process.argv.slice(2);
if (!url || !apiKey) {
  console.error('usage: node walkthrough.js <server url> <api key> [configured source]');
  process.exit(2);
}

function check(ok: boolean, what: string, seen: unknown): asserts ok {
  if (!ok) throw new Error(`${what}: got ${JSON.stringify(seen)}`);
}

/** The error answer of a refused call, read with the generated converter of its status. */
async function refusal<T>(call: Promise<unknown>, status: number, read: (json: unknown) => T): Promise<T> {
  try {
    await call;
  } catch (err) {
    if (!(err instanceof ResponseError)) throw err;
    check(err.response.status === status, `expected status ${status}`, err.response.status);
    return read(await err.response.json());
  }
  throw new Error(`expected status ${status}, the call succeeded`);
}

async function main(): Promise<string> {
  const config = new Configuration({ basePath: url, accessToken: apiKey });
  const agents = new AgentsApi(config);
  const sessions = new SessionsApi(config);
  const context = new ContextApi(config);
  const steps = new StepsApi(config);
  const messages = new MessagesApi(config);
  const toolCalls = new ToolCallsApi(config);
  const subscriptions = new SubscriptionsApi(config);

  const { agentId } = await agents.createAgent({
    createAgentRequest: {
      context: 'You resolve support tickets.',
      tools: [{ name: 'lookup_ticket', description: 'Looks a ticket up' }],
    },
  });
  check(agentId.startsWith('agt_'), 'agentId', agentId);
  const { sessionId } = await sessions.createSession({ createSessionRequest: { agentId } });
  check(sessionId.startsWith('ses_'), 'sessionId', sessionId);
  console.log(`agent ${agentId} session ${sessionId}`);

  const asked = await messages.appendMessages({
    sessionId,
    appendMessagesRequest: { role: 'user', content: 'Where is my refund?' },
  });
  const askedSeq = asked.seq;
  check(askedSeq !== undefined && asked.seqs === undefined, 'one message: its seq', asked);

  const items: ContextItem[] = [{ kind: 'notice', content: 'The customer is on the enterprise plan.' }];
  const first = await context.addContext({ addContextRequest: { sessionId, key: 'plan-1', items } });
  const replay = await context.addContext({ addContextRequest: { sessionId, key: 'plan-1', items } });
  check(first.recorded === 1 && replay.recorded === 0, 'recorded 1, then 0 on the replay', [first, replay]);
  const conflict: ConflictError = await refusal(
    context.addContext({
      addContextRequest: { sessionId, key: 'plan-1', items: [{ kind: 'notice', content: 'Another plan.' }] },
    }),
    409,
    ConflictErrorFromJSON,
  );
  check(conflict.error.code === ConflictErrorBodyCodeEnum.StateContextKeyConflict, '409 code', conflict.error);
  check(conflict.error.retryable === false, '409 retryable', conflict.error);
  console.log(`context recorded ${first.recorded} then ${replay.recorded}, conflict ${conflict.error.code}`);

  const sources = ['generic', ...(customSource ? [customSource] : [])];
  for (const source of sources) {
    const ticket = source === 'generic' ? 'T-42' : 'OPS-7';
    const made = await subscriptions.subscribe({ sessionId, subscriptionRequest: { source, ticket } });
    check(made.created && made.subscription.source === source && made.subscription.ticket === ticket, source, made);
  }
  const listed = await subscriptions.listSubscriptions({ sessionId });
  check(listed.subscriptions.length === sources.length, 'subscriptions', listed);
  console.log(`subscribed ${sources.join('+')}`);

  const neutral = await steps.runStep({ sessionId, stepRequest: {} });
  if (neutral.format !== 'neutral') throw new Error(`neutral step: format ${neutral.format}`);
  check(neutral.rows.length === 1 && neutral.rows[0]?.kind === 'notice', 'neutral rows', neutral.rows);
  check(neutral.request.activeTools.join() === 'lookup_ticket,__finish__', 'activeTools', neutral.request);
  check(neutral.request.toolChoice === 'auto', 'toolChoice', neutral.request.toolChoice);
  check(neutral.cursor === null, 'cursor', neutral.cursor);
  const chat = await steps.runStep({ sessionId, stepRequest: { format: 'openai-chat' } });
  if (chat.format !== 'openai-chat') throw new Error(`openai-chat step: format ${chat.format}`);
  check(chat.request.promptCacheKey === neutral.cache.key, 'prompt_cache_key', chat.request);
  const choice = chat.request.toolChoice;
  const allowed = typeof choice === 'object' ? choice.allowedTools?.tools.map((t) => t._function.name) : undefined;
  check(allowed?.join() === 'lookup_ticket,__finish__', 'tool_choice.allowed_tools', choice);
  console.log(`steps ${neutral.format} ${neutral.rows.length} row, ${chat.format} cache key kept`);

  const turn = await messages.appendMessages({
    sessionId,
    appendMessagesRequest: {
      messages: [
        {
          role: 'assistant',
          content: '',
          toolCalls: [{ callId: 'call-1', name: 'lookup_ticket', arguments: '{"ticket":"T-42"}' }],
        },
        { role: 'tool', callId: 'call-1', content: 'T-42 is open' },
      ],
    },
  });
  const [call, result, ...more] = turn.seqs ?? [];
  const inOrder = call !== undefined && call > askedSeq && result === call + 1 && more.length === 0;
  check(inOrder && turn.seq === undefined, 'two seqs, in order, after the question', turn);
  console.log(`turn seqs ${turn.seqs?.length}`);

  const off = await context.addContext({
    addContextRequest: { sessionId, items: [{ kind: 'tools', disable: ['lookup_ticket'] }] },
  });
  check(off.recorded === 1, 'tools item recorded', off);
  const switched = await steps.runStep({ sessionId, stepRequest: {} });
  if (switched.format !== 'neutral') throw new Error(`step: format ${switched.format}`);
  check(switched.request.activeTools.join() === '__finish__', 'activeTools after the switch', switched.request);
  const inactive = await toolCalls.gateToolCall({
    sessionId,
    gateToolCallRequest: { callId: 'call-2', name: 'lookup_ticket' },
  });
  check(!inactive.execute && inactive.reason === ToolDecisionReasonEnum.ToolInactive, 'inactive tool', inactive);
  const unknown = await toolCalls.gateToolCall({
    sessionId,
    gateToolCallRequest: { callId: 'call-3', name: 'no_such_tool' },
  });
  check(!unknown.execute && unknown.reason === ToolDecisionReasonEnum.ToolUnavailable, 'unknown tool', unknown);
  console.log(`gate ${inactive.reason} ${unknown.reason}`);

  const rewound = await sessions.rewindSession({ sessionId, rewindRequest: { toStepId: neutral.stepId } });
  check(rewound.requeued === 1 && rewound.cursor === null, 'rewind', rewound);
  check(rewound.activeTools.join() === 'lookup_ticket,__finish__', 'activeTools after the rewind', rewound);
  const { messages: kept } = await messages.listMessages({ sessionId });
  check(kept.length === 1 && kept[0]?.role === 'user' && kept[0].seq === askedSeq, 'messages after the rewind', kept);
  console.log(`rewind requeued ${rewound.requeued}, messages ${kept.length}`);

  const erased = await sessions.deleteSessionRaw({ sessionId });
  check(erased.raw.status === 204, 'erase status', erased.raw.status);
  const gone: NotFoundError = await refusal(sessions.getSession({ sessionId }), 404, NotFoundErrorFromJSON);
  check(gone.error.code === NotFoundErrorBodyCodeEnum.StateSessionNotFound, '404 code', gone.error);
  console.log(`erased ${erased.raw.status}, then ${gone.error.code}`);
  return `walkthrough typescript-fetch ok: session ${sessionId}`;
}

main().then(
  (summary) => console.log(summary),
  (err: unknown) => {
    console.error(`walkthrough typescript-fetch FAILED: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
