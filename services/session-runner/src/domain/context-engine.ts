import type { StepFormat, StepMode } from '@ctxflow/contracts';
import type { SessionEvents } from '../ports/session-events.ts';
import type { ContextInput } from './context-blocks.ts';
import { KeyedMutex } from './keyed-mutex.ts';
import type { AgentRecord, MessageEntry, SessionMeta } from './model.ts';
import type { UsageReport } from './provider-usage.ts';
import type { StepResult } from './step-answer.ts';
import * as agents from './use-cases/agents.ts';
import type { EngineContext, EnginePorts } from './use-cases/context.ts';
import * as intake from './use-cases/context-intake.ts';
import * as contextPass from './use-cases/context-pass.ts';
import * as history from './use-cases/history.ts';
import * as messages from './use-cases/messages.ts';
import * as providerUsage from './use-cases/provider-usage.ts';
import * as queries from './use-cases/queries.ts';
import * as sessions from './use-cases/sessions.ts';
import * as toolGate from './use-cases/tool-gate.ts';

export type { NeutralStepResult, StepResult } from './step-answer.ts';
export type { PendingCall } from './turns.ts';
export type { AgentInput } from './use-cases/agents.ts';
export type { EnginePorts } from './use-cases/context.ts';
export type { MessageInput } from './use-cases/messages.ts';
export type { ToolDecision } from './use-cases/tool-gate.ts';

/**
 * The context engine: every use case of the session-runner (domain/use-cases/), over
 * ports only, behind one object for the HTTP routes and the step-request consumer.
 * Writes to one session are serialized in this process; the store's atomic commits
 * guard against other processes.
 */
export class ContextEngine {
  readonly #ctx: EngineContext;

  constructor(ports: EnginePorts) {
    this.#ctx = { ...ports, locks: new KeyedMutex() };
  }

  // ---------------------------------------------------------------- agents

  createAgent(tenant: string, input: agents.AgentInput): Promise<AgentRecord> {
    return agents.createAgent(this.#ctx, tenant, input);
  }

  /** N3, N6: the edit merges blocks by id and applies from the next run. */
  updateAgent(
    tenant: string,
    agentId: string,
    input: { context?: ContextInput; model?: string },
  ): Promise<AgentRecord> {
    return agents.updateAgent(this.#ctx, tenant, agentId, input);
  }

  getAgent(tenant: string, agentId: string): Promise<AgentRecord> {
    return agents.getAgent(this.#ctx, tenant, agentId);
  }

  /** Erases an agent, its memories and (with `cascade`) its sessions. */
  deleteAgent(tenant: string, agentId: string, options: { cascade?: boolean } = {}): Promise<void> {
    return agents.deleteAgent(this.#ctx, tenant, agentId, options);
  }

  remember(tenant: string, agentId: string, content: string): Promise<void> {
    return agents.remember(this.#ctx, tenant, agentId, content);
  }

  // ---------------------------------------------------------------- sessions

  createSession(tenant: string, input: { agentId?: string; context?: ContextInput }): Promise<SessionMeta> {
    return sessions.createSession(this.#ctx, tenant, input);
  }

  /** N4, N5, N6: thread context is staged until the next rebuild; forceRefresh folds it now. */
  updateSession(tenant: string, sessionId: string, input: { context?: ContextInput; forceRefresh?: boolean }) {
    return sessions.updateSession(this.#ctx, tenant, sessionId, input);
  }

  /** Erases a session in every store (the feed's data, the session store's records). */
  deleteSession(tenant: string, sessionId: string): Promise<void> {
    return sessions.deleteSession(this.#ctx, tenant, sessionId);
  }

  // ---------------------------------------------------------------- context intake

  /** R12-R14: the app's `POST /context`. */
  addContext(
    tenant: string,
    input: { sessionId: string; items: unknown; key?: string },
  ): Promise<{ recorded: number }> {
    return intake.addContext(this.#ctx, tenant, input);
  }

  /** R7, R8, R10, R15: a tool's or hook's `ctx.addContext`, first-wins per call site. */
  addCallContext(
    tenant: string,
    sessionId: string,
    input: { callId: string; origin: 'tool' | 'hook'; site?: string; items: unknown },
  ): Promise<{ recorded: number }> {
    return intake.addCallContext(this.#ctx, tenant, sessionId, input);
  }

  // ---------------------------------------------------------------- messages

  /** One message (v1). */
  appendMessage(tenant: string, sessionId: string, input: messages.MessageInput): Promise<MessageEntry> {
    return messages.appendMessage(this.#ctx, tenant, sessionId, input);
  }

  /** Records messages in order, in ONE store write. */
  appendMessages(tenant: string, sessionId: string, inputs: messages.MessageInput[]): Promise<MessageEntry[]> {
    return messages.appendMessages(this.#ctx, tenant, sessionId, inputs);
  }

  // ---------------------------------------------------------------- queries

  /** R4: what a user may see: messages only, never a context row. */
  listMessages(tenant: string, sessionId: string) {
    return queries.listMessages(this.#ctx, tenant, sessionId);
  }

  /** R4: a snapshot a UI may show: no context row in it. */
  snapshot(tenant: string, sessionId: string) {
    return queries.snapshot(this.#ctx, tenant, sessionId);
  }

  /** The operator's view (inspector): everything, rows included. */
  inspect(tenant: string, sessionId: string) {
    return queries.inspect(this.#ctx, tenant, sessionId);
  }

  recentChunks(sessionId: string) {
    return this.#ctx.events.recent(sessionId);
  }

  /** The recent chunks with their event ids (a stream's replay). */
  recentEvents(sessionId: string) {
    return this.#ctx.events.recentEvents(sessionId);
  }

  subscribe(sessionId: string, listener: Parameters<SessionEvents['subscribe']>[1]) {
    return this.#ctx.events.subscribe(sessionId, listener);
  }

  listSessions(tenant: string, limit = 100) {
    return queries.listSessions(this.#ctx, tenant, limit);
  }

  // ---------------------------------------------------------------- the context pass

  /** A model call's context pass (R2, R22); a committed `requestId` answers its step again (R33). */
  step(
    tenant: string,
    sessionId: string,
    input: { mode?: StepMode; requestId?: string; format?: StepFormat; since?: number } = {},
  ): Promise<StepResult> {
    return contextPass.step(this.#ctx, tenant, sessionId, input);
  }

  // ---------------------------------------------------------------- provider usage

  /** A step's provider usage as the SDK returned it, kept beside what its unchanged prefix predicted. */
  reportUsage(tenant: string, sessionId: string, stepId: string, report: UsageReport) {
    return providerUsage.reportUsage(this.#ctx, tenant, sessionId, stepId, report);
  }

  // ---------------------------------------------------------------- the tool gate

  /** R17, R20: the tool gate. A repeated callId gets the same decision. */
  gateToolCall(tenant: string, sessionId: string, input: { callId: string; name: string }) {
    return toolGate.gateToolCall(this.#ctx, tenant, sessionId, input);
  }

  /** R21: an approval answers "may this call run", not "override the switch". */
  answerApproval(tenant: string, sessionId: string, callId: string, approved: boolean) {
    return toolGate.answerApproval(this.#ctx, tenant, sessionId, callId, approved);
  }

  /** R35: a client tool's answer; after its deadline it becomes a late-answer notice. */
  answerClientCall(tenant: string, sessionId: string, callId: string, content: string) {
    return toolGate.answerClientCall(this.#ctx, tenant, sessionId, callId, content);
  }

  // ---------------------------------------------------------------- history

  /** R28, R29: truncates the log after a step (`toStepId`) or before it (`beforeStepId`). */
  rewind(tenant: string, sessionId: string, ref: { toStepId?: string; beforeStepId?: string }) {
    return history.rewind(this.#ctx, tenant, sessionId, ref);
  }

  /** R31: a run that failed restarts from its start; its rows are re-made once each. */
  restartRun(
    tenant: string,
    sessionId: string,
    input: { requestId?: string; format?: StepFormat; since?: number } = {},
  ): Promise<StepResult> {
    return history.restartRun(this.#ctx, tenant, sessionId, input);
  }

  /** R32: a branch copies rows with their cursors and tool effects, never the queue. */
  branch(tenant: string, sessionId: string, input: { atStepId?: string }): Promise<SessionMeta> {
    return history.branch(this.#ctx, tenant, sessionId, input);
  }
}
