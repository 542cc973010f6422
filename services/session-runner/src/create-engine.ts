import { HttpStepContext } from './adapters/http-step-context.ts';
import { MemoryMemoryRecall } from './adapters/memory-memory-recall.ts';
import { MemorySessionEvents } from './adapters/memory-session-events.ts';
import { MemorySessionStore } from './adapters/memory-session-store.ts';
import { ContextEngine, type EngineDeps } from './domain/context-engine.ts';
import type { AgentRecord } from './domain/model.ts';
import { systemClock } from './ports/clock.ts';
import type { StepContextSource } from './ports/step-context-source.ts';
import { noopRunnerTelemetry } from './ports/telemetry.ts';

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

/** An engine on in-memory adapters, each replaceable. */
export function createEngine(overrides: Partial<EngineDeps> & { feed?: StepContextSource } = {}): ContextEngine {
  return new ContextEngine({
    store: overrides.store ?? new MemorySessionStore(),
    stepContextFor: overrides.stepContextFor ?? hookSelector(overrides.feed),
    memory: overrides.memory ?? new MemoryMemoryRecall(),
    events: overrides.events ?? new MemorySessionEvents(),
    clock: overrides.clock ?? systemClock,
    telemetry: overrides.telemetry ?? noopRunnerTelemetry,
    ...(overrides.newId ? { newId: overrides.newId } : {}),
    ...(overrides.heldSessions === undefined ? {} : { heldSessions: overrides.heldSessions }),
    ...(overrides.heldBytes === undefined ? {} : { heldBytes: overrides.heldBytes }),
    ...(overrides.feedData ? { feedData: overrides.feedData } : {}),
  });
}
