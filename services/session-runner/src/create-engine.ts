import { CachingSessionStore } from './adapters/caching-session-store.ts';
import { HttpStepContext } from './adapters/http-step-context.ts';
import { MemoryMemoryRecall } from './adapters/memory-memory-recall.ts';
import { MemorySessionEvents } from './adapters/memory-session-events.ts';
import { MemorySessionStore } from './adapters/memory-session-store.ts';
import { MemoryStepUsageStore } from './adapters/memory-step-usage-store.ts';
import { idsFrom, randomIds } from './adapters/random-ids.ts';
import { textMemo } from './adapters/text-memo.ts';
import { ContextEngine } from './domain/context-engine.ts';
import type { AgentRecord } from './domain/model.ts';
import { systemMessageBytes } from './domain/model-request.ts';
import { type Clock, systemClock } from './ports/clock.ts';
import type { MemoryRecall } from './ports/memory-recall.ts';
import type { SessionEvents } from './ports/session-events.ts';
import type { SessionFeedData } from './ports/session-feed-data.ts';
import type { SessionStore } from './ports/session-store.ts';
import type { StepContextSource } from './ports/step-context-source.ts';
import type { StepUsageStore } from './ports/step-usage-store.ts';
import { noopRunnerTelemetry, type RunnerTelemetry } from './ports/telemetry.ts';

/** What an engine runs on (createEngine): each port replaceable. */
export interface EngineDeps {
  store: SessionStore;
  /** The stepContext hook of an agent: its HTTP hook, the ticket feed, or none. */
  stepContextFor(agent: AgentRecord | undefined): StepContextSource | undefined;
  memory: MemoryRecall;
  events: SessionEvents;
  clock: Clock;
  telemetry: RunnerTelemetry;
  /** New ids (ports/ids.ts); default adapters/random-ids.ts. */
  newId?: (prefix: string) => string;
  /** Sessions whose state this runner holds between steps (adapters/session-cache.ts); default 1,000, 0 for none. */
  heldSessions?: number;
  /** Estimated heap bytes of held session states at most (adapters/session-cache.ts); default defaultHeldBytes() (HELD_HEAP_SHARE of the heap limit). */
  heldBytes?: number;
  /** Call records a held state keeps: the store's CTXFLOW_CALL_IDS_KEPT (adapters/request-retention.ts). */
  callIdsKept?: number;
  /** The session data the ticket feed keeps (erased with the session); none when no feed is wired. */
  feedData?: SessionFeedData;
  /** The provider usage of steps (ports/step-usage-store.ts); default in memory. */
  usage?: StepUsageStore;
}

/** Heap bytes of the system prompts whose sizes an engine keeps (adapters/text-memo.ts). */
const SYSTEM_BYTES_MEMO = 4 * 1024 * 1024;

/**
 * Picks an agent's stepContext hook: its HTTP hook when it names a URL,
 * otherwise the ticket feed (`feed`), when one is wired.
 */
export function hookSelector(
  feed: StepContextSource | undefined,
): (agent: AgentRecord | undefined) => StepContextSource | undefined {
  const http = new Map<string, HttpStepContext>();
  return (agent) => {
    const url = agent?.stepContext.url;
    if (!url) return feed;
    let hook = http.get(url);
    if (!hook) {
      hook = new HttpStepContext(url);
      http.set(url, hook);
    }
    return hook;
  };
}

/**
 * An engine on in-memory adapters, each replaceable. The store is wrapped in the
 * caching decorator (adapters/caching-session-store.ts): what this runner keeps of
 * sessions and agents between requests. The system prompts' sizes are memoised
 * (adapters/text-memo.ts).
 */
export function createEngine(overrides: Partial<EngineDeps> & { feed?: StepContextSource } = {}): ContextEngine {
  const store = new CachingSessionStore(overrides.store ?? new MemorySessionStore(), {
    ...(overrides.heldSessions === undefined ? {} : { heldSessions: overrides.heldSessions }),
    ...(overrides.heldBytes === undefined ? {} : { heldBytes: overrides.heldBytes }),
    ...(overrides.callIdsKept === undefined ? {} : { callIdsKept: overrides.callIdsKept }),
  });
  return new ContextEngine({
    store,
    cache: store,
    systemBytes: textMemo(systemMessageBytes, SYSTEM_BYTES_MEMO),
    stepContextFor: overrides.stepContextFor ?? hookSelector(overrides.feed),
    memory: overrides.memory ?? new MemoryMemoryRecall(),
    events: overrides.events ?? new MemorySessionEvents(),
    clock: overrides.clock ?? systemClock,
    telemetry: overrides.telemetry ?? noopRunnerTelemetry,
    ids: overrides.newId ? idsFrom(overrides.newId) : randomIds,
    ...(overrides.feedData ? { feedData: overrides.feedData } : {}),
    usage: overrides.usage ?? new MemoryStepUsageStore(),
  });
}
