import { CtxflowError } from '@ctxflow/contracts';
import { z } from 'zod';
import type { ContextBlock } from './model.ts';

/** N1: a string is one unkeyed block; a list is blocks `{ id?, content }`. */
export const contextInputSchema = z.union([
  z.string(),
  z.array(z.strictObject({ id: z.string().min(1).max(200).optional(), content: z.string() })),
]);

export type ContextInput = z.infer<typeof contextInputSchema>;

export function toBlocks(input: ContextInput | undefined): ContextBlock[] {
  if (input === undefined) return [];
  if (typeof input === 'string') return [{ content: input }];
  const seen = new Set<string>();
  for (const block of input) {
    if (block.id === undefined) continue;
    if (seen.has(block.id))
      throw new CtxflowError('validation_error', `context: block id ${JSON.stringify(block.id)} appears twice`);
    seen.add(block.id);
  }
  return input.map((b) => (b.id === undefined ? { content: b.content } : { id: b.id, content: b.content }));
}

/**
 * N6: an update addresses blocks by id. A block with an id replaces the block
 * with that id (or is appended); an unkeyed block replaces the unkeyed block.
 * Blocks the update does not name are kept, in place.
 */
export function mergeBlocks(current: ContextBlock[], update: ContextBlock[]): ContextBlock[] {
  const result = current.map((b) => ({ ...b }));
  for (const block of update) {
    const index = result.findIndex((b) => b.id === block.id);
    if (index >= 0) result[index] = { ...block };
    else result.push({ ...block });
  }
  return result;
}

/** N2: block contents go verbatim into the system prefix; ids never do. */
export function renderSystemPrefix(agentBlocks: ContextBlock[], threadBlocks: ContextBlock[]): string {
  return [...agentBlocks, ...threadBlocks].map((b) => b.content).join('\n\n');
}

export function sameBlocks(a: ContextBlock[], b: ContextBlock[]): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
