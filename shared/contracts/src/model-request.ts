/**
 * The neutral model request of Contract v2: the `request` of a POST /sessions/:id/steps answer when no
 * provider `format` is asked for, and the `cache` hints next to it. Provider formats are built from it.
 *
 * Rules every request keeps:
 * - A tool call in an assistant message is followed (before any later user/assistant message) by exactly
 *   one tool message per call, in call order; context rows may sit between them only if the engine commits
 *   rows there (provider formats place them after the tool results of a turn).
 * - Every request of a session is a prefix of the next one in `messages` (R3): entries never change.
 */

export interface RequestTool {
  /** ^[A-Za-z0-9_-]{1,64}$ */
  name: string;
  description?: string;
  /** JSON Schema object, as declared; __finish__ has one. */
  parameters?: Record<string, unknown>;
  strict?: boolean;
}

/** `arguments`: the JSON text the model produced. */
export interface RequestToolCall {
  callId: string;
  name: string;
  arguments: string;
}

export interface RowRef {
  id: string;
  kind: 'instruction' | 'notice' | 'tools' | 'memory';
  source: 'app' | 'hook' | 'tool' | 'memory' | 'late-answer';
}

export type RequestMessage =
  /** The system prefix: messages[0] when system != ''. */
  | { role: 'system'; content: string }
  /** A context row (R6 role rule unchanged). */
  | { role: 'system' | 'user'; content: string; row: RowRef }
  | { role: 'user'; content: string }
  /** toolCalls is absent when the turn made none. */
  | { role: 'assistant'; content: string; toolCalls?: RequestToolCall[] }
  /** The result of a call of the assistant turn before it. */
  | { role: 'tool'; content: string; callId: string; name: string }
  /**
   * A result without its call in the assistant turn before it (recorded by a v1 client, or a client's
   * answer to a call no assistant message made), as recorded: `callId` and `name` when known. Provider
   * formats send it as a user turn (providers refuse a tool message there).
   */
  | { role: 'tool'; content: string; callId?: string; name?: string };

/** forced_completion: { type: 'tool', name: '__finish__' }. */
export type ToolChoice = 'auto' | { type: 'tool'; name: string };

/** Neutral format (the default, no `format` given). */
export interface ModelRequest {
  messages: RequestMessage[];
  /** Every declared tool, unchanged by switches (R16). */
  tools: RequestTool[];
  activeTools: string[];
  /** The prefix text ('' when none). */
  system: string;
  /** The agent's model of this run, null when none. */
  model: string | null;
  toolChoice: ToolChoice;
}

export interface CacheHints {
  rebuilt: boolean;
  reason: 'new_thread' | 'agent_context' | 'model_change' | 'force_refresh' | 'cache_cold' | 'branch' | null;
  /** Stable for a session (a provider cache key, e.g. OpenAI prompt_cache_key); <= 64 chars. */
  key: string;
  /** Index in request.messages of the last message of the system prefix; -1 when system is ''. */
  prefixEnd: number;
  /** How many messages the previous request of this session had (0 on the first). */
  previousEnd: number;
}

// POST /sessions/:id/steps answer: { stepId, rows, request, cursor, cache }; v1 fields unchanged.
