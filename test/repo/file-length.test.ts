/**
 * Source files stay short: a TypeScript file of the repository over 400 lines says why in its
 * header (its leading comments, or the doc comment of the one class it holds), in words such
 * as "Longer than 400 lines: ...". Generated files are left out.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const LIMIT = 400;
/** How far into a file its header may reach (imports come first in some files). */
const HEADER_LINES = 120;
const REASON = /(?:longer than|over) ~?400 lines/i;

function typeScriptFiles(): string[] {
  return execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.ts'], { encoding: 'utf8' })
    .split('\n')
    .filter((path) => path !== '' && !path.includes('/generated/') && !path.endsWith('.d.ts') && existsSync(path));
}

/** The files over the limit whose header gives no reason, with their length. */
function unexplained(files: { path: string; text: string }[]): string[] {
  return files.flatMap(({ path, text }) => {
    const lines = text.split('\n');
    const length = text.endsWith('\n') ? lines.length - 1 : lines.length;
    if (length <= LIMIT) return [];
    return REASON.test(lines.slice(0, HEADER_LINES).join('\n')) ? [] : [`${path}: ${length} lines`];
  });
}

describe('source files over 400 lines say why', () => {
  it('file length: the check names a long file without a reason and passes one with a reason', () => {
    const long = (header: string) => `${header}\n${'x;\n'.repeat(LIMIT)}`;
    expect(
      unexplained([
        { path: 'a.ts', text: long('/** A file. */') },
        { path: 'b.ts', text: long('/**\n * Longer than 400 lines: one table.\n */') },
        { path: 'c.ts', text: 'x;\n'.repeat(LIMIT) },
      ]),
    ).toEqual(['a.ts: 401 lines']);
  });

  it('file length: every TypeScript file over 400 lines states its reason in its header', () => {
    const files = typeScriptFiles().map((path) => ({ path, text: readFileSync(path, 'utf8') }));
    expect(files.length).toBeGreaterThan(100);
    expect(unexplained(files)).toEqual([]);
  });
});
