/**
 * docs/performance.md's figures table, from bench/results/latest.json (a full
 * `npm run bench -- --json` rewrites both).
 *
 *   node bench/figures-table.ts          rewrite the table
 *   node bench/figures-table.ts --check  exit 1 when it is not latest.json's
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type BenchDocument, withFigures } from './lib/results.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DOCS = join(ROOT, 'docs', 'performance.md');
const latest = JSON.parse(readFileSync(join(ROOT, 'bench', 'results', 'latest.json'), 'utf8')) as BenchDocument;
const current = readFileSync(DOCS, 'utf8');
const wanted = withFigures(current, latest);

if (process.argv.includes('--check')) {
  if (current !== wanted) {
    process.stderr.write(
      'docs/performance.md: the figures are not those of bench/results/latest.json; run node bench/figures-table.ts\n',
    );
    process.exit(1);
  }
} else if (current !== wanted) {
  writeFileSync(DOCS, wanted);
  process.stderr.write('written: docs/performance.md\n');
}
