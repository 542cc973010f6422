import { CtxflowError, idSchema, MAX_CONTEXT_BLOCKS, MAX_CONTEXT_BYTES } from '@ctxflow/contracts';
import { z } from 'zod';
import type { ContextBlock } from './model.ts';

/**
 * One block `{ id?, content }`, as a request gives it and an agent answers it: one schema, so the
 * OpenAPI document names it ContextBlock (answers) and ContextBlockInput (requests).
 */
export const contextBlockSchema = z
  .strictObject({ id: idSchema.optional(), content: z.string() })
  .meta({ id: 'ContextBlock', title: 'ContextBlock' });

/**
 * N1: a string is one unkeyed block; a list is blocks `{ id?, content }`.
 * At most MAX_CONTEXT_BLOCKS blocks; their bytes are checked by `toBlocks`.
 */
export const contextInputSchema = z.xor([
  z.string(),
  // zod checks the count before any block: a list far over the limit is refused without walking it
  // (200,000 blocks: one issue, under a millisecond). No pipe: the OpenAPI document would lose the list.
  z.array(contextBlockSchema).max(MAX_CONTEXT_BLOCKS),
]);

export type ContextInput = z.infer<typeof contextInputSchema>;

/** UTF-8 bytes of the ids and contents of some blocks. */
export function blockBytes(blocks: readonly ContextBlock[]): number {
  let bytes = 0;
  for (const b of blocks)
    bytes += Buffer.byteLength(b.content, 'utf8') + (b.id === undefined ? 0 : Buffer.byteLength(b.id, 'utf8'));
  return bytes;
}

/**
 * Refuses blocks over MAX_CONTEXT_BLOCKS or MAX_CONTEXT_BYTES (a request's
 * blocks, or the result of merging them), before anything is written.
 */
export function checkBlockLimits(blocks: readonly ContextBlock[], what = 'context'): void {
  if (blocks.length > MAX_CONTEXT_BLOCKS) {
    throw new CtxflowError(
      'validation_error',
      `${what}: ${blocks.length} blocks, over the limit of ${MAX_CONTEXT_BLOCKS}`,
    );
  }
  const bytes = blockBytes(blocks);
  if (bytes > MAX_CONTEXT_BYTES) {
    throw new CtxflowError('validation_error', `${what}: ${bytes} bytes, over the ${MAX_CONTEXT_BYTES}-byte limit`);
  }
}

export function toBlocks(input: ContextInput | undefined): ContextBlock[] {
  if (input === undefined) return [];
  const blocks: ContextBlock[] =
    typeof input === 'string'
      ? [{ content: input }]
      : input.map((b) => (b.id === undefined ? { content: b.content } : { id: b.id, content: b.content }));
  checkBlockLimits(blocks);
  const seen = new Set<string>();
  for (const [i, block] of blocks.entries()) {
    if (block.id === undefined) continue;
    if (seen.has(block.id)) {
      throw new CtxflowError('validation_error', `context.${i}.id: the id of an earlier block; an id appears once`);
    }
    seen.add(block.id);
  }
  return blocks;
}

/**
 * N6: an update addresses blocks by id. A block with an id replaces the block
 * with that id (or is appended); an unkeyed block replaces the unkeyed block.
 * Blocks the update does not name are kept, in place. Linear: one index of
 * the current blocks by id, each block's id read once. The result is checked
 * against the limits (checkBlockLimits) before it is returned.
 */
export function mergeBlocks(current: ContextBlock[], update: ContextBlock[]): ContextBlock[] {
  const result = current.map((b) => ({ ...b }));
  // `undefined` keys the unkeyed block, as `b.id === block.id` matched it before.
  const at = new Map<string | undefined, number>();
  for (let i = 0; i < result.length; i++) {
    const id = result[i]!.id;
    if (!at.has(id)) at.set(id, i);
  }
  for (const block of update) {
    const id = block.id;
    const index = at.get(id);
    if (index !== undefined) result[index] = { ...block };
    else {
      at.set(id, result.length);
      result.push({ ...block });
    }
  }
  checkBlockLimits(result);
  return result;
}

/** N2: block contents go verbatim into the system prefix; ids never do. */
export function renderSystemPrefix(agentBlocks: ContextBlock[], threadBlocks: ContextBlock[]): string {
  return [...agentBlocks, ...threadBlocks].map((b) => b.content).join('\n\n');
}

export function sameBlocks(a: ContextBlock[], b: ContextBlock[]): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
