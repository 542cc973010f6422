/**
 * The error registry and the limits are documented: every code of
 * shared/contracts/src/errors.ts is a row of docs/api-limits.md with its
 * status and retryable, and the doc names no code the registry lacks.
 */
import { readFileSync } from 'node:fs';
import {
  errorCodes,
  MAX_CACHE_TTL_MS,
  MAX_CONTEXT_BLOCKS,
  MAX_CONTEXT_BYTES,
  MAX_DEADLINE_MS,
  MAX_ID_LENGTH,
} from '@ctxflow/contracts';
import { describe, expect, it } from 'vitest';

const doc = readFileSync(new URL('../../docs/api-limits.md', import.meta.url), 'utf8');

describe('the API limits document', () => {
  it('every registered error code (not_found included) is a row with its status and retryable', () => {
    for (const [code, entry] of Object.entries(errorCodes)) {
      expect(doc, code).toContain(`| \`${code}\` | ${entry.status} | ${entry.retryable ? 'yes' : 'no'} |`);
    }
    const documented = [...doc.matchAll(/^\| `([a-z_]+)` \| \d{3} \|/gm)].map((m) => m[1]);
    expect(documented.sort()).toEqual(Object.keys(errorCodes).sort());
  });

  it('details is documented', () => {
    expect(doc).toMatch(/`details`, present on some `400 validation_error`/);
  });

  it('the limits the code enforces are the limits the document states', () => {
    const n = (value: number) => value.toLocaleString('en-US');
    expect(doc).toContain(`1 to ${MAX_ID_LENGTH} characters`);
    expect(doc).toContain(`1 to ${n(MAX_DEADLINE_MS)} (7 days)`);
    expect(doc).toContain(`1 to ${n(MAX_CACHE_TTL_MS)} (24 hours)`);
    expect(doc).toContain(`at most ${n(MAX_CONTEXT_BLOCKS)} blocks`);
    expect(doc).toContain(`at most ${n(MAX_CONTEXT_BYTES)} bytes`);
  });
});
