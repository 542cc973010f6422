/**
 * The README and docs/: the README stays short (what ctxflow is, the two commands, the
 * architecture, the API, errors, configuration, links), the rest lives in docs/, every
 * relative link between them (file and #heading) leads somewhere, and the README's error
 * table is the error-code registry.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { errorCodes } from '@ctxflow/contracts';
import { describe, expect, it } from 'vitest';

const DOCS = [
  'README.md',
  ...readdirSync('docs')
    .filter((f) => f.endsWith('.md'))
    .map((f) => join('docs', f)),
];

/** Markdown outside fenced code blocks. */
function prose(markdown: string): string {
  return markdown.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/ /g, '-');
}

function anchors(file: string): Set<string> {
  const found = new Set<string>();
  for (const match of prose(readFileSync(file, 'utf8')).matchAll(/^#{1,6} (.+)$/gm)) found.add(slug(match[1]!));
  return found;
}

function links(file: string): string[] {
  const targets: string[] = [];
  for (const match of prose(readFileSync(file, 'utf8')).matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = match[1]!;
    if (!/^[a-z]+:/.test(target)) targets.push(target);
  }
  return targets;
}

describe('README and docs/', () => {
  it('docs: README.md is at most 20,000 bytes', () => {
    expect(statSync('README.md').size).toBeLessThanOrEqual(20_000);
  });

  it('docs: the conformance table lives only in docs/conformance.md', () => {
    const readme = readFileSync('README.md', 'utf8');
    expect(readme).not.toContain('conformance-table:start');
    expect(readme).not.toMatch(/^\| R1 \|/m);
    expect(readme).toContain('](docs/conformance.md)');
  });

  it('docs: the README links each of docs/walkthrough, operations, testing, performance and conformance', () => {
    const linked = new Set(links('README.md').map((target) => target.split('#')[0]));
    for (const doc of ['walkthrough', 'operations', 'testing', 'performance', 'conformance']) {
      expect(linked, doc).toContain(`docs/${doc}.md`);
    }
  });

  it('docs: every relative link in README.md and docs/*.md names a file that exists, and a heading in it', () => {
    const broken: string[] = [];
    for (const file of DOCS) {
      for (const target of links(file)) {
        const [path = '', anchor] = target.split('#');
        const resolved = path === '' ? file : normalize(join(dirname(file), path));
        if (!existsSync(resolved)) broken.push(`${file}: ${target} (no ${resolved})`);
        else if (anchor && resolved.endsWith('.md') && !anchors(resolved).has(anchor)) {
          broken.push(`${file}: ${target} (no heading #${anchor} in ${resolved})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('docs: the README error table lists every registered code with its status and retryable, and no other', () => {
    const readme = readFileSync('README.md', 'utf8');
    const section = readme.slice(
      readme.indexOf('### Error codes'),
      readme.indexOf('\n## ', readme.indexOf('### Error codes')),
    );
    const rows = [...section.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \| (yes|no) \|/gm)].map((m) => [
      m[1],
      Number(m[2]),
      m[3] === 'yes',
    ]);
    const registry = Object.entries(errorCodes).map(([code, entry]) => [code, entry.status, entry.retryable]);
    expect(rows.sort()).toEqual(registry.sort());
  });
});
