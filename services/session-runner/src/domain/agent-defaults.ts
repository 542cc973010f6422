import { FINISH_TOOL } from '@ctxflow/contracts';
import type { AgentRecord, ToolDeclaration } from './model.ts';

/** The stepContext hook's limits of an agent that sets none (R25). */
export const DEFAULT_MAX_BYTES = 32 * 1024;
export const DEFAULT_TIMEOUT_MS = 5_000;
/** How long a provider keeps a prompt cache warm, unless the agent says otherwise. */
export const DEFAULT_CACHE_TTL_MS = 5 * 60_000;
/** How long a client tool's answer may take, unless its declaration says otherwise (R35). */
export const DEFAULT_CLIENT_DEADLINE_MS = 60_000;

export const FINISH_DECLARATION: ToolDeclaration = {
  name: FINISH_TOOL,
  description: 'Call when the task is complete.',
};

/** The tools a session offers: its agent's, or `__finish__` alone. */
export function toolsOf(agent: AgentRecord | undefined): ToolDeclaration[] {
  return agent?.tools ?? [FINISH_DECLARATION];
}
