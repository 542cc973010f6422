/**
 * Command descriptors for the context engine's property test. Choices that
 * depend on the state (which session, which step, which earlier add) are small
 * numbers taken modulo what exists when the command runs, so every generated
 * sequence is valid and shrinks well.
 */
import fc from 'fast-check';

export type ToolName = 'a' | 'b' | 'c';
export type Mode = 'first' | 'retry' | 'forced_completion';

/** An item to add; the runner writes a unique marker into it. */
export type ItemGen =
  | { kind: 'notice' | 'instruction'; text: number; source?: 'app' | 'tool' | 'memory' | 'late-answer' }
  | { kind: 'tools'; disable: ToolName[]; enable: ToolName[] };

/** What the stepContext hook does when a step calls it. */
export type HookSpec =
  | { type: 'batch'; items: ItemGen[] }
  /** Items of these sizes (bytes of padding): often over the agent's maxBytes (R27). */
  | { type: 'oversize'; sizes: number[] }
  | { type: 'none' }
  | { type: 'empty' }
  | { type: 'throw' }
  /** Waits for the abort signal, then answers a batch that must never land (R25, R26). */
  | { type: 'timeout' }
  | { type: 'invalid'; variant: number };

export type Command =
  | { t: 'app'; s: number; items: ItemGen[]; keyed: boolean }
  | { t: 'appRepeat'; s: number; pick: number; variant: 'same' | 'changed' | 'more' | 'fewer' }
  | { t: 'appInvalid'; s: number; variant: number }
  | { t: 'switch'; s: number; on: boolean; tools: ToolName[] }
  | { t: 'toolAdd'; s: number; call: number; site?: 'x' | 'y'; items: ItemGen[]; claimApp: boolean }
  | { t: 'hookAdd'; s: number; call: number; site?: 'x' | 'y'; items: ItemGen[] }
  | { t: 'siteRepeat'; s: number; pick: number; same: boolean }
  | { t: 'gate'; s: number; call: number; tool: ToolName | '__finish__' | 'zz' }
  | { t: 'approve'; s: number; call: number; approved: boolean }
  | { t: 'step'; s: number; mode: Mode; withRequestId: boolean; hook: HookSpec }
  | { t: 'crash'; s: number; mode: Mode; restart: boolean; hook: HookSpec; between?: ItemGen }
  | { t: 'redeliver'; s: number; pick: number; hook: HookSpec }
  | { t: 'rewind'; s: number; pick: number; before: boolean }
  | { t: 'branch'; s: number; at?: number }
  | { t: 'restart'; s: number; withRequestId: boolean; hook: HookSpec }
  | { t: 'message'; s: number; role: 'user' | 'assistant' | 'tool'; text: number }
  | { t: 'thread'; s: number; forceRefresh: boolean }
  | { t: 'advance'; ms: number }
  | { t: 'agent' };

/** Short texts, some with characters a renderer could get wrong. */
export const TEXTS = [
  'Answer in French.',
  'Ticket T-1 was closed.',
  'Do not edit report.pdf until the upload finishes.',
  'Quote: "</context> is text" & <b>tags</b>',
  'Zurück um 15 Uhr — ok ✓',
  '',
];

const session = fc.nat({ max: 7 });
const pick = fc.nat({ max: 15 });
const tool = fc.constantFrom<ToolName>('a', 'b', 'c');
const tools = fc.uniqueArray(tool, { minLength: 1, maxLength: 2 });
const site = fc.option(fc.constantFrom<'x' | 'y'>('x', 'y'), { nil: undefined });
const text = fc.nat({ max: TEXTS.length - 1 });
const mode = fc.constantFrom<Mode>('first', 'retry', 'forced_completion');

function itemGen(options: { enable: boolean; sources: boolean }): fc.Arbitrary<ItemGen> {
  // R14: the app's items may name their own source (never hook).
  const sourcedText = fc.record({
    kind: fc.constantFrom<'notice' | 'instruction'>('notice', 'instruction'),
    text,
    source: fc.constantFrom<'app' | 'tool' | 'memory' | 'late-answer'>('app', 'tool', 'memory', 'late-answer'),
  });
  const plainText = fc.record({ kind: fc.constantFrom<'notice' | 'instruction'>('notice', 'instruction'), text });
  const toolsItem = fc.record({
    kind: fc.constant<'tools'>('tools'),
    disable: options.enable ? fc.uniqueArray(tool, { maxLength: 2 }) : tools,
    enable: options.enable ? fc.uniqueArray(tool, { maxLength: 2 }) : fc.constant<ToolName[]>([]),
  });
  return fc.oneof(
    { arbitrary: options.sources ? fc.oneof({ arbitrary: plainText, weight: 3 }, sourcedText) : plainText, weight: 3 },
    { arbitrary: toolsItem, weight: 2 },
  );
}

const appItems = fc.array(itemGen({ enable: true, sources: true }), { minLength: 1, maxLength: 3 });
const toolItems = fc.array(itemGen({ enable: false, sources: false }), { minLength: 1, maxLength: 2 });
const hookItems = fc.array(itemGen({ enable: true, sources: false }), { minLength: 1, maxLength: 2 });

export const hookSpec: fc.Arbitrary<HookSpec> = fc.oneof(
  {
    arbitrary: fc.record({
      type: fc.constant<'batch'>('batch'),
      items: fc.array(itemGen({ enable: true, sources: false }), { minLength: 1, maxLength: 3 }),
    }),
    weight: 6,
  },
  {
    arbitrary: fc.record({
      type: fc.constant<'oversize'>('oversize'),
      sizes: fc.array(fc.integer({ min: 200, max: 2400 }), { minLength: 1, maxLength: 5 }),
    }),
    weight: 2,
  },
  { arbitrary: fc.constant<HookSpec>({ type: 'none' }), weight: 2 },
  { arbitrary: fc.constant<HookSpec>({ type: 'empty' }), weight: 1 },
  { arbitrary: fc.constant<HookSpec>({ type: 'throw' }), weight: 1 },
  { arbitrary: fc.constant<HookSpec>({ type: 'timeout' }), weight: 1 },
  {
    arbitrary: fc.record({ type: fc.constant<'invalid'>('invalid'), variant: fc.nat({ max: 5 }) }),
    weight: 1,
  },
);

export function commandArbitrary(): fc.Arbitrary<Command> {
  const c = <T extends Command>(arbitrary: fc.Arbitrary<T>, weight: number) => ({ arbitrary, weight });
  return fc.oneof(
    c(fc.record({ t: fc.constant('app' as const), s: session, items: appItems, keyed: fc.boolean() }), 5),
    c(
      fc.record({
        t: fc.constant('appRepeat' as const),
        s: session,
        pick,
        variant: fc.constantFrom<'same' | 'changed' | 'more' | 'fewer'>('same', 'same', 'changed', 'more', 'fewer'),
      }),
      2,
    ),
    c(fc.record({ t: fc.constant('appInvalid' as const), s: session, variant: fc.nat({ max: 7 }) }), 1),
    c(fc.record({ t: fc.constant('switch' as const), s: session, on: fc.boolean(), tools }), 3),
    c(
      fc.record(
        {
          t: fc.constant('toolAdd' as const),
          s: session,
          call: pick,
          site,
          items: toolItems,
          claimApp: fc.boolean(),
        },
        { requiredKeys: ['t', 's', 'call', 'items', 'claimApp'] },
      ),
      3,
    ),
    c(
      fc.record(
        { t: fc.constant('hookAdd' as const), s: session, call: pick, site, items: hookItems },
        { requiredKeys: ['t', 's', 'call', 'items'] },
      ),
      2,
    ),
    c(fc.record({ t: fc.constant('siteRepeat' as const), s: session, pick, same: fc.boolean() }), 3),
    c(
      fc.record({
        t: fc.constant('gate' as const),
        s: session,
        call: pick,
        tool: fc.constantFrom<ToolName | '__finish__' | 'zz'>('a', 'b', 'c', 'c', 'c', '__finish__', 'zz'),
      }),
      3,
    ),
    c(fc.record({ t: fc.constant('approve' as const), s: session, call: pick, approved: fc.boolean() }), 2),
    c(
      fc.record({
        t: fc.constant('step' as const),
        s: session,
        mode,
        withRequestId: fc.boolean(),
        hook: hookSpec,
      }),
      8,
    ),
    c(
      fc.record(
        {
          t: fc.constant('crash' as const),
          s: session,
          mode,
          restart: fc.boolean(),
          hook: hookSpec,
          between: itemGen({ enable: true, sources: false }),
        },
        { requiredKeys: ['t', 's', 'mode', 'restart', 'hook'] },
      ),
      2,
    ),
    c(fc.record({ t: fc.constant('redeliver' as const), s: session, pick, hook: hookSpec }), 1),
    c(fc.record({ t: fc.constant('rewind' as const), s: session, pick, before: fc.boolean() }), 3),
    c(fc.record({ t: fc.constant('branch' as const), s: session, at: pick }, { requiredKeys: ['t', 's'] }), 2),
    c(fc.record({ t: fc.constant('restart' as const), s: session, withRequestId: fc.boolean(), hook: hookSpec }), 1),
    c(
      fc.record({
        t: fc.constant('message' as const),
        s: session,
        role: fc.constantFrom<'user' | 'assistant' | 'tool'>('user', 'assistant', 'tool'),
        text,
      }),
      2,
    ),
    c(fc.record({ t: fc.constant('thread' as const), s: session, forceRefresh: fc.boolean() }), 1),
    c(fc.record({ t: fc.constant('advance' as const), ms: fc.constantFrom(200, 900, 1500) }), 1),
    c(fc.constant<Command>({ t: 'agent' }), 1),
  );
}
