/**
 * Comments point at documents that are in the repository: every `<name>.md` a source
 * or test file names exists, and every README section it names by title
 * (`README.md "Configuration"`) is a heading of the README.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

const files = ['services', 'shared', 'scripts', 'test', 'bench'].flatMap((dir) => sources(join(ROOT, dir)));
const headings = new Set(
  readFileSync(join(ROOT, 'README.md'), 'utf8')
    .split('\n')
    .filter((line) => /^#{1,6} /.test(line))
    .map((line) => line.replace(/^#+ /, '').trim()),
);

describe('documents named in comments', () => {
  it('exist in the repository', () => {
    const missing: string[] = [];
    for (const file of files) {
      for (const [name] of readFileSync(file, 'utf8').matchAll(/[\w./-]+\.md\b/g)) {
        const candidates = [join(ROOT, name), join(dirname(file), name), join(ROOT, 'docs', name)];
        if (!candidates.some((path) => existsSync(path))) missing.push(`${relative(ROOT, file)}: ${name}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('name README sections that are headings of the README', () => {
    const missing: string[] = [];
    for (const file of files) {
      for (const [, title] of readFileSync(file, 'utf8').matchAll(/README\.md "([^"]+)"/g)) {
        if (!headings.has(title!)) missing.push(`${relative(ROOT, file)}: "${title}"`);
      }
    }
    expect(missing).toEqual([]);
  });
});
