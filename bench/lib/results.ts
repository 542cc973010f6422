/**
 * The bench's results on disk: every recorded run as `bench/results/<startedAt>.json`
 * (UTC, to the minute: `2026-12-01T18-28Z.json`), the last full run also as
 * `bench/results/latest.json`, and docs/performance.md's figures table, rendered from
 * latest.json between its markers.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { progress } from './progress.ts';
import type { ScenarioResult, SkippedScenario } from './report.ts';

export interface BenchDocument {
  startedAt: string;
  durationS: number;
  mode: string;
  machine: { cores: number; cpu: string; node: string };
  scenarios: ScenarioResult[];
  skipped: SkippedScenario[];
}

export const FIGURES_START = '<!-- figures:start (node bench/figures-table.ts writes this block) -->';
export const FIGURES_END = '<!-- figures:end -->';

/** `2026-12-01T18:28:08.844Z` -> `2026-12-01T18-28Z.json`. */
export function resultFileName(startedAt: string): string {
  if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d/.test(startedAt)) throw new Error(`startedAt: not an ISO time: ${startedAt}`);
  return `${startedAt.slice(0, 16).replace(':', '-')}Z.json`;
}

const ratio = (v: number | null) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(2) : '-');
const figure = (v: number | string) =>
  typeof v === 'number' ? v.toLocaleString('en-US', { maximumFractionDigits: 3 }) : v;
/** A goal's value is null in the JSON (Infinity) for rows that only report. */
const hasGoal = (s: ScenarioResult) => typeof s.goal.value === 'number' && Number.isFinite(s.goal.value);
const cell = (text: string) => text.replace(/\|/g, '\\|');

/** The block between the markers: the run, the rows not met, one table row per scenario. */
export function figuresBlock(document: BenchDocument): string {
  const { machine } = document;
  const notMet = document.scenarios.filter((s) => hasGoal(s) && !s.met).map((s) => s.id);
  const lines = [
    `The last full run, ${document.startedAt.slice(0, 10)} ([\`bench/results/latest.json\`](../bench/results/latest.json)):`,
    `${machine.cores} cores (${machine.cpu}), Node ${machine.node}, ${document.durationS} s.`,
    notMet.length === 0 ? 'Every goal is met.' : `Not met: ${notMet.join(', ')}; every other row with a goal is met.`,
    '',
    '| row | what the ratio divides | goal | median (min-max) | met | figures (medians) |',
    '|---|---|---|---|---|---|',
    ...document.scenarios.map((s) => {
      const goal = hasGoal(s) ? `${s.goal.op === '==' ? '=' : s.goal.op} ${s.goal.value}` : '-';
      const met = hasGoal(s) ? (s.met ? 'met' : '**not met**') : '-';
      const figures = Object.entries(s.figures)
        .map(([name, value]) => `${name} ${figure(value)}`)
        .join('; ');
      return `| ${s.id} | ${cell(`${s.title}: ${s.ratioOf}`)} | ${goal} | ${ratio(s.ratio.median)} (${ratio(s.ratio.min)}-${ratio(s.ratio.max)}) | ${met} | ${cell(figures)} |`;
    }),
    ...document.skipped.map((s) => `| ${s.id} | ${cell(s.title)} | - | skipped: ${cell(s.reason)} | - | - |`),
  ];
  return `${FIGURES_START}\n${lines.join('\n')}\n${FIGURES_END}`;
}

/** The markdown with its figures block replaced; throws when the markers are missing. */
export function withFigures(markdown: string, document: BenchDocument): string {
  const start = markdown.indexOf(FIGURES_START);
  const end = markdown.indexOf(FIGURES_END);
  if (start < 0 || end < start) throw new Error(`no figures block (${FIGURES_START} ... ${FIGURES_END})`);
  return markdown.slice(0, start) + figuresBlock(document) + markdown.slice(end + FIGURES_END.length);
}

/**
 * Writes the run as `<startedAt>.json`, and, for a full run, as latest.json with the
 * figures of `docsFile` rewritten from it. Returns the files written.
 */
export function recordRun(
  document: BenchDocument,
  options: { root: string; latest: boolean; docsFile?: string },
): string[] {
  const dir = join(options.root, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const text = `${JSON.stringify(document, null, 2)}\n`;
  const written = [join(dir, resultFileName(document.startedAt))];
  if (options.latest) written.push(join(dir, 'latest.json'));
  for (const file of written) writeFileSync(file, text);
  // In the repository's format, so `npm run check` (biome) passes on the committed files.
  try {
    execFileSync('npx', ['biome', 'format', '--write', ...written], { cwd: options.root, stdio: 'ignore' });
  } catch {
    progress(`biome could not format ${written.join(', ')}; run \`npx biome format --write\` on them`);
  }
  if (options.latest) {
    const docs = options.docsFile ?? join(options.root, 'docs', 'performance.md');
    writeFileSync(docs, withFigures(readFileSync(docs, 'utf8'), document));
    written.push(docs);
  }
  return written;
}
