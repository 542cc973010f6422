/**
 * Writes docs/conformance.md, the one conformance table: for every requirement id
 * (R1-R35, N1-N6), the conformance tests that prove it, read from the test names in
 * test/conformance/*.test.ts (a test's name starts with the id it proves; engine-on-redis.test.ts,
 * which compares the stores answer by answer, proves no single id and is left out).
 *
 *   node scripts/conformance-table.ts          rewrite it
 *   node scripts/conformance-table.ts --check  exit 1 when it is stale or an id has no test
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const TESTS = join(ROOT, 'test', 'conformance');
const OUTPUT = join(ROOT, 'docs', 'conformance.md');
/** Runs in the conformance-on-redis project only (vitest.config.ts); its tests name no requirement. */
const STORE_COMPARISON = 'engine-on-redis.test.ts';

/** The requirements R1-R35 and N1-N6, one line each: the source of the table docs/conformance.md shows. */
const REQUIREMENTS: [string, string][] = [
  ['R1', 'rows have role `context` and a kind: instruction, notice, tools (disable / enable lists), memory'],
  [
    'R2',
    'callers add items, never rows; the context pass commits every new item as rows in ONE store commit, then the model is called',
  ],
  ['R3', "a row is sent on every later call exactly as stored: each request's bytes start with the previous request's"],
  ['R4', 'rows are never shown to users: UI messages, snapshots and the chat stream skip them'],
  ['R5', 'each row records its source: app, hook, tool, memory, late-answer'],
  ['R6', 'app and hook rows take a system form; tool rows are presented like a user turn'],
  ['R7', 'tools and hooks add with `ctx.addContext`; queued, delivered at the next model call, once'],
  ['R8', "a tool's items always carry source tool; a hook's default to app"],
  [
    'R9',
    'unknown kind, a tools item switching `__finish__` off, an item over 32 KiB: validation_error, nothing queued',
  ],
  ['R10', 're-running a tool or hook for the same call queues nothing twice'],
  ['R11', 'the app adds at any time: idle, running, or paused on a client tool'],
  ['R12', '`POST /context` `{ sessionId, items, key? }` -> `{ recorded }`; authentication is ours to add'],
  [
    'R13',
    'same key and items -> recorded 0; same key, other items -> 409, non-retryable, nothing written; no key -> a new request each time',
  ],
  [
    'R14',
    'app items get source app unless they name their own; hook is reserved; invalid item 400; unknown session 404; nothing recorded on any refusal',
  ],
  ['R15', "a tool's or hook's `addContext` is first-wins: repeats record nothing and are never refused"],
  ['R16', 'a tools item changes the active tools from the next model call on; the offered tool list does not change'],
  ['R17', 'a call to a switched-off tool gets `tool_inactive`, an undeclared one `tool_unavailable`: nothing runs'],
  ['R18', 'the active set is folded from the log, so it follows rewinds and branches'],
  ['R19', 'only app and hook rows enable a tool; a tool may switch off, never on'],
  ['R20', '`__finish__` can never be switched off; in forced completion the completion tool is always callable'],
  ['R21', 'a switch-off reaches a waiting approval, even while still queued: approving then gives `tool_inactive`'],
  ['R22', 'the stepContext hook runs before every model call (first attempt, retry, forced completion)'],
  [
    'R23',
    'the cursor is stored on the rows it came with; the hook always gets the cursor of the last batch in the log',
  ],
  ['R24', 'the hook returns only what is new since the cursor'],
  [
    'R25',
    'limits: a batch with its cursor within maxBytes (32 KiB default); the hook within timeoutMs (5 s default), abort signal at the limit',
  ],
  [
    'R26',
    'a hook that throws, times out or returns an invalid result is skipped: no row, cursor unchanged, run goes on, `context_skipped` chunk, `core.context.skipped` log',
  ],
  [
    'R27',
    'an over-size batch keeps the items that fit, in order, then one notice saying how many were left out; the cursor still advances',
  ],
  [
    'R28',
    'a rewind truncates rows; a truncated queued item is delivered again, once; cursor reverts; memory recalled again; active tools refolded',
  ],
  [
    'R29',
    "a switch-off or instruction queued by a tool goes with that tool's call: removed with it by a rewind, kept if the call is kept",
  ],
  ['R30', 'a retry after a step committed keeps the rows of the step it re-runs'],
  [
    'R31',
    'a run that failed on its first step restarts from its start: its rows are re-made, once each, never lost, never doubled',
  ],
  ['R32', 'a branch copies rows with their cursor and tool effects, never the queue'],
  ['R33', "a step lost after its rows were committed keeps them; the recovering step's hook starts from their cursor"],
  [
    'R34',
    'memory auto-inject commits a memory row before the call; a recall too large commits an empty memory row and a `context_skipped` chunk',
  ],
  [
    'R35',
    "a client tool's answer after its deadline becomes a notice row of source late-answer at the next model call",
  ],
  ['N1', 'a block is `{ id?, content }`; context input is a string (one unkeyed block) or a list of blocks'],
  ['N2', 'content goes verbatim into the cached system prefix; ids are opaque handles'],
  ['N3', 'agent context is shared by all threads; frozen when a run is created; an edit applies from the next run'],
  [
    'N4',
    'thread context is deferred: a warm turn replays the exact cached bytes; an edit folds in at the next rebuild',
  ],
  ['N5', '`forceRefresh` folds the staged thread context now'],
  ['N6', 'blocks are addressed by id: updating one block cannot drop another'],
];

interface Found {
  file: string;
  name: string;
}

/** Test names as written: `it('...')`, `it("...")` or `it(\`...\`)` (a template keeps its `${...}`). */
function testNames(source: string): string[] {
  const names: string[] = [];
  const pattern = /\bit\(\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|`((?:[^`\\]|\\.)*)`)/g;
  for (const match of source.matchAll(pattern)) {
    const raw = match[1] ?? match[2] ?? match[3] ?? '';
    names.push(raw.replace(/\\(.)/g, '$1'));
  }
  return names;
}

function collect(): Map<string, Found[]> {
  const byId = new Map<string, Found[]>(REQUIREMENTS.map(([id]) => [id, []]));
  const files = readdirSync(TESTS)
    .filter((f) => f.endsWith('.test.ts') && f !== STORE_COMPARISON)
    .sort();
  for (const file of files) {
    for (const name of testNames(readFileSync(join(TESTS, file), 'utf8'))) {
      const id = /^([RN]\d+):/.exec(name)?.[1];
      if (!id) throw new Error(`${file}: test "${name}" does not start with a requirement id`);
      const list = byId.get(id);
      if (!list) throw new Error(`${file}: test "${name}" names ${id}, which is not a requirement id`);
      list.push({ file: relative(ROOT, join(TESTS, file)), name });
    }
  }
  return byId;
}

function cell(text: string): string {
  return text.replaceAll('|', '\\|').replaceAll('\n', ' ');
}

function render(byId: Map<string, Found[]>): string {
  const lines = [
    '# Conformance: requirement ids and their tests',
    '',
    'Generated by `node scripts/conformance-table.ts` from the test names in',
    '`test/conformance/*.test.ts` (each name starts with the id it proves); do not edit',
    'by hand. The ids and their sentences are the requirement table of the design',
    '(specifications "Changing Context Mid-Session" for R1-R35 and "Context" for N1-N6).',
    '',
    'Run the suite: `npx vitest run test/conformance`.',
    '',
    '| id | requirement | test file | tests |',
    '|---|---|---|---|',
  ];
  for (const [id, text] of REQUIREMENTS) {
    const found = byId.get(id) ?? [];
    const files = [...new Set(found.map((f) => `\`${f.file}\``))].join('<br>') || '**none**';
    const names = found.map((f) => cell(f.name)).join('<br>') || '**no test**';
    lines.push(`| ${id} | ${cell(text)} | ${files} | ${names} |`);
  }
  const total = [...byId.values()].reduce((n, list) => n + list.length, 0);
  lines.push('', `${REQUIREMENTS.length} requirement ids, ${total} tests.`, '');
  return lines.join('\n');
}

const byId = collect();
const text = render(byId);
const missing = REQUIREMENTS.filter(([id]) => (byId.get(id) ?? []).length === 0).map(([id]) => id);

if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(OUTPUT, 'utf8');
  } catch {}
  const problems = [
    ...(missing.length ? [`ids without a test: ${missing.join(', ')}`] : []),
    ...(current === text ? [] : ['docs/conformance.md is stale: run node scripts/conformance-table.ts']),
  ];
  for (const problem of problems) console.error(problem);
  process.exit(problems.length ? 1 : 0);
}

writeFileSync(OUTPUT, text);
console.log(`wrote ${relative(ROOT, OUTPUT)}${missing.length ? `; ids without a test: ${missing.join(', ')}` : ''}`);
