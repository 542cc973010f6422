/**
 * Commit subjects: `npm run check` lints every commit since a fixed base with commitlint
 * (@commitlint/config-conventional, headers of at most 72 characters). Bodies carry
 * measurements and are not limited; subjects may start with an id (R12, N3) or a name.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> };

/** commitlint's verdict on one message, with the project's configuration (package.json). */
function lint(message: string): { ok: boolean; output: string } {
  const run = spawnSync(process.execPath, ['node_modules/@commitlint/cli/cli.js'], {
    input: message,
    encoding: 'utf8',
  });
  return { ok: run.status === 0, output: `${run.stdout}${run.stderr}` };
}

describe('commit subjects', () => {
  it('commits: npm run check lints the commits since a fixed base, the one docs/testing.md names', () => {
    const base = /^commitlint --from ([0-9a-f]{7,40}) --to HEAD$/.exec(pkg.scripts['lint:commits'] ?? '')?.[1];
    expect(base).toBeDefined();
    expect(readFileSync('docs/testing.md', 'utf8')).toContain(`commitlint --from ${base} --to HEAD`);
    expect(pkg.scripts.check).toContain('npm run -s lint:commits');
  });

  it('commits: a conventional subject of 72 characters passes, with an id first and a long body', () => {
    const body = `measured: ${'1.4 us per span against 6-9, '.repeat(6)}`;
    expect(lint(`fix(api): R12 a replayed key answers recorded 0\n\n${body}\n`)).toMatchObject({ ok: true });
    const longest = `fix(runner): ${'x'.repeat(59)}`;
    expect(longest).toHaveLength(72);
    expect(lint(`${longest}\n`)).toMatchObject({ ok: true });
    expect(lint('docs: README to 15.9 KB, the rest into docs/\n')).toMatchObject({ ok: true });
  });

  it('commits: a header of 73 characters is refused', () => {
    const result = lint(`fix(runner): ${'x'.repeat(60)}\n`);
    expect(result.ok).toBe(false);
    expect(result.output).toContain('[header-max-length]');
  });

  it('commits: a subject without a conventional type is refused', () => {
    const result = lint('Performance: full bench on fa4774d (280 s)\n');
    expect(result.ok).toBe(false);
    expect(result.output).toContain('[type-enum]');
    expect(lint('README: the S6-S1 paragraph\n').ok).toBe(false);
  });

  it("commits: git's merge commits are not linted", () => {
    expect(lint("Merge branch 'wip/input'\n")).toMatchObject({ ok: true });
  });
});
