/**
 * An idempotency key's fingerprint (R13) is stored with the key: the same items must
 * give the same fingerprint in every release, or a replay after an upgrade would be
 * refused as a conflict.
 */
import type { SourcedItem } from '@ctxflow/contracts';
import { describe, expect, it } from 'vitest';
import { fingerprint } from '../../src/domain/fingerprint.ts';

const items = [
  { kind: 'notice', content: 'Ticket "A-1" → done', source: 'app' },
  { kind: 'tools', source: 'app', disable: ['search'], enable: [] },
] as SourcedItem[];

describe('fingerprint', () => {
  it('is the SHA-256 of the canonical JSON (keys sorted at every level), stable across releases', () => {
    expect(fingerprint(items)).toBe('b5222b995a4ba9e5c19c2ba6e8d0ed8aa500d6bf0efb583554ef0f856782b0a0');
  });

  it('does not depend on key order; does depend on item order and content', () => {
    const reordered = items.map((item) => Object.fromEntries(Object.entries(item).reverse())) as SourcedItem[];
    expect(fingerprint(reordered)).toBe(fingerprint(items));
    expect(fingerprint([...items].reverse())).not.toBe(fingerprint(items));
    expect(fingerprint([{ ...items[0]!, content: 'Ticket "A-1" → done.' } as SourcedItem, items[1]!])).not.toBe(
      fingerprint(items),
    );
  });
});
