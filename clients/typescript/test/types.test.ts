import type * as Client from '@ctxflow/client';
import type { CacheHints, ContextItem, ErrorCode, errorCodes, ModelRequest } from '@ctxflow/contracts';
import type { bodySchemas, ContextEngine, ProviderRequests, StepResult } from '@ctxflow/session-runner';
import type { subscriptionBodySchema } from '@ctxflow/subscriptions';
import { describe, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';

/**
 * The client's types agree with the server: `tsc --noEmit` (npm run typecheck) compiles these
 * assertions; a disagreement is a type error, not a runtime failure.
 */
type In<S extends z.ZodType> = z.input<S>;
/** Context input is checked in two stages (a count, then blocks): the output is the shape a caller must send. */
type Out<S extends z.ZodType> = z.output<S>;
type Answer<K extends keyof ContextEngine> = ContextEngine[K] extends (...args: never[]) => Promise<infer R>
  ? R
  : never;

describe('@ctxflow/client types', () => {
  it('request bodies are exactly what the zod schemas accept', () => {
    expectTypeOf<Client.CreateAgentRequest>().toEqualTypeOf<Out<typeof bodySchemas.createAgentBody>>();
    expectTypeOf<Client.UpdateAgentRequest>().toEqualTypeOf<Out<typeof bodySchemas.patchAgentBody>>();
    expectTypeOf<Client.CreateSessionRequest>().toEqualTypeOf<Out<typeof bodySchemas.createSessionBody>>();
    expectTypeOf<Client.UpdateSessionRequest>().toEqualTypeOf<Out<typeof bodySchemas.patchSessionBody>>();
    expectTypeOf<Client.StepRequest>().toEqualTypeOf<NonNullable<In<typeof bodySchemas.stepBody>>>();
    expectTypeOf<Client.RestartRequest>().toEqualTypeOf<NonNullable<In<typeof bodySchemas.restartBody>>>();
    expectTypeOf<Client.MessageInput>().toEqualTypeOf<In<typeof bodySchemas.messageBody>>();
    expectTypeOf<{ messages: Client.MessageInput[] }>().toEqualTypeOf<In<typeof bodySchemas.messageBatchBody>>();
    expectTypeOf<Client.GateRequest>().toEqualTypeOf<In<typeof bodySchemas.toolCallBody>>();
    expectTypeOf<{ approved: boolean }>().toEqualTypeOf<In<typeof bodySchemas.approvalBody>>();
    expectTypeOf<{ content: string }>().toEqualTypeOf<In<typeof bodySchemas.answerBody>>();
    expectTypeOf<{ content: string }>().toEqualTypeOf<In<typeof bodySchemas.memoryBody>>();
    expectTypeOf<Client.BranchRequest>().toEqualTypeOf<NonNullable<In<typeof bodySchemas.branchBody>>>();
    expectTypeOf<Client.Subscription>().toEqualTypeOf<In<typeof subscriptionBodySchema>>();
    // Items and rewinds are checked beyond their zod type (by the domain, by a refine): the client's type is narrower.
    expectTypeOf<Client.AddContextRequest>().toExtend<In<typeof bodySchemas.postContextBody>>();
    expectTypeOf<Client.CallContextRequest>().toExtend<In<typeof bodySchemas.callContextBody>>();
    expectTypeOf<Client.RewindRequest>().toExtend<In<typeof bodySchemas.rewindBody>>();
    expectTypeOf<Client.ContextItem>().toExtend<ContextItem>();
    expectTypeOf<ContextItem>().toExtend<Client.ContextItem>();
  });

  it('answers are what the engine returns', () => {
    expectTypeOf<Client.ErrorCode>().toEqualTypeOf<ErrorCode>();
    expectTypeOf<keyof typeof errorCodes>().toEqualTypeOf<Client.ErrorCode>();
    // The client reads what the document says; the engine's types may be narrower, never wider.
    expectTypeOf<ModelRequest>().toExtend<Client.ModelRequest>();
    expectTypeOf<Client.CacheHints>().toEqualTypeOf<CacheHints>();
    // The HTTP answer adds `format` to the engine's step result.
    expectTypeOf<StepResult & { format: 'neutral' }>().toExtend<Client.NeutralStepAnswer>();
    // The server's provider bodies are requests the official SDKs take.
    expectTypeOf<ProviderRequests>().toExtend<Client.ProviderRequests>();
    expectTypeOf<Answer<'gateToolCall'>>().toExtend<Client.ToolDecision>();
    expectTypeOf<Answer<'answerApproval'>>().toExtend<Client.ToolDecision>();
    expectTypeOf<Answer<'answerClientCall'>>().toExtend<Client.ClientAnswer>();
    expectTypeOf<Answer<'rewind'>>().toExtend<Client.RewindAnswer>();
    expectTypeOf<Answer<'updateSession'>>().toExtend<Client.UpdateSessionAnswer>();
    expectTypeOf<Answer<'addContext'>>().toExtend<Client.Recorded>();
    expectTypeOf<Answer<'snapshot'>>().toExtend<Client.SessionSnapshot>();
    expectTypeOf<Answer<'listMessages'>[number]>().toExtend<Client.Message>();
  });
});
