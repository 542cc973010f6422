/**
 * The staleness rule is code in one place (adapters/ticket-marks.ts, which the
 * memory adapter calls) and mirrored in the Redis script's include
 * (redis/includes/ticket-mark.lua): for generated marks and updates, versions and
 * times present or absent, ties included, both say the same "stale" and the same
 * next mark, as the Redis adapter encodes them (`<version>|<occurredAt ms>`).
 */
import { loadLuaScript } from '@ctxflow/service-kit';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import {
  isStale,
  nextMark,
  occurredAtMs,
  type TicketMark,
} from '../../services/step-context/src/adapters/ticket-marks.ts';
import { requireRedis } from '../support/services.ts';

const MARKS = loadLuaScript(
  new URL('../../services/step-context/src/adapters/redis/includes/ticket-mark.lua', import.meta.url),
);
/** Runs the include on a list of cases: per case, `stale` and the next mark. */
const HARNESS = `${MARKS}
local out = {}
for i, c in ipairs(cjson.decode(ARGV[1])) do
  local mark = c.mark
  if mark == '' then mark = nil end
  out[i] = { stale = isStale(mark, c.version, c.at), next = nextMark(mark, c.version, c.at) }
end
return cjson.encode(out)
`;

/** A mark as the Redis adapter stores it: `<version>|<occurredAt ms>`, either part '' when absent. */
const encode = (mark: TicketMark) => `${mark.version ?? ''}|${mark.occurredAtMs ?? ''}`;

const version = fc.option(fc.integer({ min: -3, max: 3 }), { nil: undefined });
const ms = fc.option(
  fc.integer({ min: 0, max: 4 }).map((n) => 1_700_000_000_000 + n * 1000),
  { nil: undefined },
);
const mark = fc.option(fc.record({ version, occurredAtMs: ms }, { requiredKeys: [] }), { nil: undefined });
const update = fc.record({
  version,
  occurredAt: fc.oneof(
    ms.map((at) => (at === undefined ? 'not a time' : new Date(at).toISOString())),
    fc.constant('2026-13-45T99:00:00Z'),
  ),
});

const redis = new Redis(requireRedis(), { maxRetriesPerRequest: 3 });
afterAll(() => redis.quit());

describe('the staleness rule in TypeScript and in the Redis script', () => {
  it('agree on stale and on the next mark for generated marks and updates', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(mark, update), { minLength: 1, maxLength: 100 }), async (cases) => {
        const sent = cases.map(([m, u]) => {
          const at = occurredAtMs(u.occurredAt);
          return {
            mark: m === undefined ? '' : encode(m),
            version: u.version === undefined ? '' : String(u.version),
            at: at === undefined ? '' : String(at),
          };
        });
        const lua = JSON.parse((await redis.eval(HARNESS, 0, JSON.stringify(sent))) as string) as {
          stale: boolean;
          next: string;
        }[];
        expect(lua).toEqual(cases.map(([m, u]) => ({ stale: isStale(m, u), next: encode(nextMark(m, u)) })));
      }),
      { numRuns: 40 },
    );
  });

  it('an equal version or time is not stale; a lower version is, whatever the times', async () => {
    const at = '2026-01-01T00:00:00.000Z';
    const ms0 = Date.parse(at);
    const cases: [TicketMark, { version?: number; occurredAt: string }, boolean][] = [
      [{ version: 2, occurredAtMs: ms0 }, { version: 2, occurredAt: at }, false],
      [{ occurredAtMs: ms0 }, { occurredAt: at }, false],
      [{ version: 2, occurredAtMs: ms0 - 1000 }, { version: 1, occurredAt: at }, true],
      [{ version: 2, occurredAtMs: ms0 + 1000 }, { occurredAt: at }, true],
    ];
    const sent = cases.map(([m, u]) => ({ mark: encode(m), version: String(u.version ?? ''), at: String(ms0) }));
    const lua = JSON.parse((await redis.eval(HARNESS, 0, JSON.stringify(sent))) as string) as { stale: boolean }[];
    expect(lua.map((r) => r.stale)).toEqual(cases.map(([, , stale]) => stale));
    expect(cases.map(([m, u]) => isStale(m, u))).toEqual(cases.map(([, , stale]) => stale));
  });
});
