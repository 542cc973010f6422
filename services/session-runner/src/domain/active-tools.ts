import { FINISH_TOOL, type SourcedItem } from '@ctxflow/contracts';
import type { LogEntry, QueuedItem, ToolDeclaration } from './model.ts';

/** Sources allowed to switch a tool on (R19). */
const ENABLERS: ReadonlySet<string> = new Set(['app', 'hook']);

function applySwitch(
  active: Set<string>,
  declared: Set<string>,
  item: Pick<SourcedItem, 'source'> & { disable?: string[]; enable?: string[] },
) {
  for (const name of item.disable ?? []) if (name !== FINISH_TOOL) active.delete(name);
  if (ENABLERS.has(item.source)) for (const name of item.enable ?? []) if (declared.has(name)) active.add(name);
}

/**
 * R16, R18, R19, R20: the active set is folded from the log: every declared
 * tool starts active; tools rows switch off (anyone) and on (app and hook
 * only); `__finish__` is always active. Returned in declaration order.
 */
export function foldActiveTools(
  tools: ToolDeclaration[],
  log: readonly LogEntry[],
  queued: readonly QueuedItem[] = [],
): string[] {
  const declared = new Set(tools.map((t) => t.name));
  const active = new Set(declared);
  for (const entry of log) {
    if (entry.type === 'row' && entry.row.kind === 'tools') applySwitch(active, declared, entry.row);
  }
  // R21: a queued switch-off already binds an approval; a queued switch-on waits for its row.
  for (const q of queued) {
    if (q.item.kind === 'tools') for (const name of q.item.disable ?? []) if (name !== FINISH_TOOL) active.delete(name);
  }
  active.add(FINISH_TOOL);
  return tools.map((t) => t.name).filter((name) => active.has(name));
}
