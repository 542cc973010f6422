/**
 * Which workspace may depend on which: the @ctxflow/* packages each workspace's
 * package.json names and its src/ imports (TypeScript's own pre-processor reads
 * the imports: static, type-only, re-exports, dynamic). No service depends on
 * another service: what two services share is a shared package (shared/*); only
 * the composition root that runs the services in one process (services/embedded)
 * depends on them. Biome's noRestrictedImports (biome.json) refuses the same
 * imports as they are typed.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

const BUS = '@ctxflow/bus';
const CONTRACTS = '@ctxflow/contracts';
const FEEDS = '@ctxflow/feeds';
const KIT = '@ctxflow/service-kit';
const SUBSCRIPTIONS = '@ctxflow/subscriptions';
const TELEMETRY = '@ctxflow/telemetry';

/** Each workspace's allowed @ctxflow/* dependencies, by folder. */
const ALLOWED: Record<string, string[]> = {
  'shared/contracts': [],
  'shared/telemetry': [],
  'shared/bus': [CONTRACTS],
  'shared/service-kit': [CONTRACTS],
  'shared/subscriptions': [CONTRACTS, KIT],
  'shared/feeds': [BUS, CONTRACTS, KIT, TELEMETRY],
  'services/feed-ingestor': [BUS, CONTRACTS, FEEDS, KIT, TELEMETRY],
  'services/session-runner': [BUS, CONTRACTS, FEEDS, KIT, SUBSCRIPTIONS, TELEMETRY],
  'services/step-context': [BUS, CONTRACTS, KIT, SUBSCRIPTIONS, TELEMETRY],
  // The composition root: the three services in one process (`npm start`).
  'services/embedded': [BUS, FEEDS, KIT, '@ctxflow/session-runner', '@ctxflow/step-context', SUBSCRIPTIONS, TELEMETRY],
  'clients/typescript': [],
};
const COMPOSITION_ROOT = 'services/embedded';

/** The workspace folders, as npm expands package.json `workspaces` (`<dir>/*`). */
function workspaces(root: string): string[] {
  const { workspaces: globs } = readJson(join(root, 'package.json')) as { workspaces: string[] };
  return globs
    .flatMap((glob) => {
      const parent = glob.replace(/\/\*$/, '');
      return readdirSync(join(root, parent), { withFileTypes: true })
        .filter((entry) => entry.isDirectory())
        .map((entry) => `${parent}/${entry.name}`);
    })
    .filter((dir) => readdirSync(join(root, dir)).includes('package.json'))
    .sort();
}

function readJson(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
}

/** The @ctxflow/* package a module specifier names (`@ctxflow/x/y` -> `@ctxflow/x`), or undefined. */
function workspacePackage(specifier: string): string | undefined {
  return /^(@ctxflow\/[^/]+)/.exec(specifier)?.[1];
}

/** The @ctxflow/* packages `dir`'s package.json names, in any kind of dependency. */
function declared(root: string, dir: string): Set<string> {
  const manifest = readJson(join(root, dir, 'package.json')) as Record<string, Record<string, string> | undefined>;
  const names = ['dependencies', 'devDependencies', 'peerDependencies', 'optionalDependencies'].flatMap((field) =>
    Object.keys(manifest[field] ?? {}),
  );
  return new Set(names.filter((name) => workspacePackage(name) === name));
}

/** `file -> @ctxflow/* packages` it imports, for every TypeScript or JavaScript file under `dir`/src. */
function imported(root: string, dir: string): Map<string, Set<string>> {
  const found = new Map<string, Set<string>>();
  const src = join(root, dir, 'src');
  for (const file of readdirSync(src, { recursive: true, encoding: 'utf8' })) {
    if (!/\.(c|m)?(t|j)sx?$/.test(file) || file.endsWith('.d.ts')) continue;
    const { importedFiles } = ts.preProcessFile(readFileSync(join(src, file), 'utf8'), true, true);
    const packages = new Set(importedFiles.flatMap((i) => workspacePackage(i.fileName) ?? []));
    if (packages.size > 0) found.set(`${dir}/src/${file}`, packages);
  }
  return found;
}

/** Every dependency outside a workspace's allowed list, and every import its package.json does not name. */
function violations(root: string, allowed: Record<string, string[]>): string[] {
  const problems: string[] = [];
  for (const dir of workspaces(root)) {
    const own = (readJson(join(root, dir, 'package.json')) as { name: string }).name;
    const allow = new Set(allowed[dir] ?? []);
    if (!(dir in allowed)) problems.push(`${dir}: not listed (add its allowed @ctxflow/* dependencies)`);
    const names = declared(root, dir);
    for (const name of names) {
      if (!allow.has(name)) problems.push(`${dir}/package.json: ${name} is not allowed`);
    }
    const used = new Set<string>();
    for (const [file, packages] of imported(root, dir)) {
      for (const name of packages) {
        if (name === own) continue;
        used.add(name);
        if (!allow.has(name)) problems.push(`${file}: imports ${name}, which is not allowed`);
        else if (!names.has(name)) problems.push(`${file}: imports ${name}, which its package.json does not name`);
      }
    }
    for (const name of names) {
      if (!used.has(name)) problems.push(`${dir}/package.json: ${name} is named but src/ never imports it`);
    }
  }
  return problems;
}

const probe = mkdtempSync(join(tmpdir(), 'ctxflow-workspace-deps-'));
afterAll(() => rmSync(probe, { recursive: true, force: true }));

function write(path: string, text: string) {
  mkdirSync(dirname(join(probe, path)), { recursive: true });
  writeFileSync(join(probe, path), text);
}

describe('workspace dependencies', () => {
  it('every workspace is listed, and depends on what its list allows, nothing else', () => {
    expect(workspaces(ROOT)).toEqual(Object.keys(ALLOWED).sort());
    expect(violations(ROOT, ALLOWED)).toEqual([]);
  });

  it('no service is allowed another service but the composition root; shared packages are allowed only shared ones', () => {
    const services = workspaces(ROOT)
      .filter((dir) => dir.startsWith('services/'))
      .map((dir) => (readJson(join(ROOT, dir, 'package.json')) as { name: string }).name);
    for (const [dir, allowed] of Object.entries(ALLOWED)) {
      const other = allowed.filter((name) => services.includes(name));
      if (dir === COMPOSITION_ROOT) expect(other.length, dir).toBeGreaterThan(0);
      else expect(other, dir).toEqual([]);
    }
  });

  it('refuses a service importing another, an undeclared import, an unused or unlisted dependency', () => {
    write('package.json', JSON.stringify({ workspaces: ['shared/*', 'services/*'] }));
    write('shared/kit/package.json', JSON.stringify({ name: '@ctxflow/kit' }));
    write('shared/kit/src/index.ts', "export * from './own.ts';\n");
    write(
      'services/a/package.json',
      JSON.stringify({ name: '@ctxflow/a', dependencies: { '@ctxflow/b': '0.1.0', '@ctxflow/kit': '0.1.0' } }),
    );
    write(
      'services/a/src/main.ts',
      [
        "import type { B } from '@ctxflow/b';",
        "import { kit } from '@ctxflow/kit';",
        "export { c } from '@ctxflow/c';",
        "const later = await import('@ctxflow/a');",
        'export const all = [kit, later] as unknown as B;',
        '',
      ].join('\n'),
    );
    write('services/b/package.json', JSON.stringify({ name: '@ctxflow/b', dependencies: { '@ctxflow/kit': '0.1.0' } }));
    write('services/b/src/index.ts', 'export type B = number;\n');
    write('services/c/package.json', JSON.stringify({ name: '@ctxflow/c' }));
    write('services/c/src/index.ts', 'export const c = 1;\n');
    const allowed = { 'shared/kit': [], 'services/a': ['@ctxflow/kit'], 'services/b': ['@ctxflow/kit'] };
    expect(violations(probe, allowed)).toEqual([
      'services/a/package.json: @ctxflow/b is not allowed',
      'services/a/src/main.ts: imports @ctxflow/b, which is not allowed',
      'services/a/src/main.ts: imports @ctxflow/c, which is not allowed',
      'services/b/package.json: @ctxflow/kit is named but src/ never imports it',
      'services/c: not listed (add its allowed @ctxflow/* dependencies)',
    ]);
  });
});
