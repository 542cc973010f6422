/**
 * What docs/testing.md relies on stays true: every file that vitest.config.ts names exists,
 * and no file of the repository cites a defect by a bare id (a letter D and a digit): such
 * ids were never defined anywhere, so a test, comment or document says in words what it
 * checks. Requirement ids (R1-R35, N1-N6) are defined in the specification and checked by
 * scripts/conformance-table.ts.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/** Tracked and new (not ignored) files, without generated ones whose text is not prose. */
function repositoryFiles(): string[] {
  return execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { encoding: 'utf8' })
    .split('\n')
    .filter((path) => path !== '' && path !== 'package-lock.json' && existsSync(path));
}

/** `path:line: text` of every bare defect id in a file's text; binary files have none. */
function defectIds(path: string, text: string): string[] {
  if (text.includes('\0')) return [];
  return text
    .split('\n')
    .flatMap((line, index) => (/\bD[1-8]\b/.test(line) ? [`${path}:${index + 1}: ${line.trim()}`] : []));
}

/** Repository paths in vitest.config.ts (strings and comments), globs left out. */
function namedFiles(config: string): string[] {
  return [...config.matchAll(/(?<![\w./*{},-])[\w.-]+(?:\/[\w.-]+)+\.(?:ts|js|json)\b(?![*/])/g)].map((m) => m[0]);
}

describe('docs/testing.md stays true', () => {
  it('testing: the id matcher finds an id in a line and ignores words and hashes', () => {
    const id = ['D', '7'].join('');
    expect(defectIds('a.ts', `ok\n// tenants at the feeds (${id})\n`)).toEqual([
      `a.ts:2: // tenants at the feeds (${id})`,
    ]);
    expect(defectIds('a.ts', 'D10 DD7 xD7 D9 sha512-AD7b D0')).toEqual([]);
  });

  it('testing: no file cites a defect by a bare id', () => {
    const found = repositoryFiles().flatMap((path) => defectIds(path, readFileSync(path, 'utf8')));
    expect(found).toEqual([]);
  });

  it('testing: every file vitest.config.ts names exists', () => {
    const config = readFileSync('vitest.config.ts', 'utf8');
    const named = namedFiles(config);
    expect(named).toEqual(
      expect.arrayContaining(['test/setup/services.ts', 'test/conformance/engine-on-redis.test.ts']),
    );
    expect(named.filter((path) => !existsSync(path))).toEqual([]);
  });
});
