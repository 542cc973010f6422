/**
 * The import rules of biome.json (`npm run check`): a workspace imports another by its
 * package name, never from its src/; no workspace's src/ imports a service but the
 * composition root's (services/embedded); a domain (a service's or a shared package's),
 * in any folder inside it, imports neither its adapters (nor its HTTP layer) nor a
 * client library; a package's tests
 * (`<package>/test/`) import its src/. Checked on probe files laid out like the
 * repository, linted with the repository's own configuration.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIOME = join(ROOT, 'node_modules', '@biomejs', 'biome', 'bin', 'biome');

/** Probe files: each line imports one module; the names are used so nothing else is reported. */
const PROBES: Record<string, string[]> = {
  'services/x/src/domain/probe.ts': [
    './model.ts',
    '../ports/clock.ts',
    '@ctxflow/contracts',
    'zod',
    'lru-cache',
    'node:crypto',
    '../adapters/store.ts',
    '../adapters/redis/scripts.ts',
    '../http/routes.ts',
    'ioredis',
    'kafkajs',
    '@platformatic/kafka',
    'fastify',
    '@fastify/otel',
    '../../../y/src/z.ts',
    '@ctxflow/bus/src/memory-bus.ts',
    '@ctxflow/feed-ingestor',
  ],
  // A shared package's domain keeps the same rules.
  'shared/y/src/domain/probe.ts': [
    './model.ts',
    '@ctxflow/contracts',
    '../adapters/a.ts',
    'ioredis',
    '@ctxflow/embedded',
  ],
  // A folder inside a domain (the feed-ingestor's domain/verifiers/ and domain/normalizers/).
  'services/x/src/domain/verifiers/probe.ts': [
    './verifier.ts',
    '../feeds.ts',
    '../../ports/delivery-ledger.ts',
    'cloudevents',
    '../../adapters/redis/keys.ts',
    '../../adapters/memory-delivery-ledger.ts',
    '../../http/feed-routes.ts',
    'ioredis',
  ],
  'services/x/src/adapters/probe.ts': [
    'ioredis',
    '../domain/model.ts',
    '../ports/clock.ts',
    '@ctxflow/bus',
    '../../../y/src/z.ts',
    '@ctxflow/y/src/z.ts',
    '../../../../shared/bus/src/index.ts',
    '@ctxflow/session-runner',
    '@ctxflow/subscriptions',
  ],
  'shared/y/src/probe.ts': ['./z.ts', '../../../services/x/src/a.ts', '@ctxflow/step-context', '@ctxflow/bus'],
  // The composition root runs the services in one process: it imports them (never their src/).
  'services/embedded/src/probe.ts': ['@ctxflow/session-runner', '@ctxflow/step-context', '../../x/src/a.ts'],
  'test/probe.test.ts': ['../services/x/src/a.ts', '@ctxflow/bus'],
  // Tests beside a package import its src/ (and helpers); another workspace by its package name.
  'services/x/test/domain/probe.test.ts': [
    '../../src/domain/model.ts',
    '../helpers.ts',
    '@ctxflow/bus',
    '../../../../test/support/services.ts',
    '../../../y/src/z.ts',
    '../../../../shared/bus/src/index.ts',
    '@ctxflow/bus/src/memory-bus.ts',
    '@ctxflow/session-runner',
  ],
  'shared/y/test/probe.test.ts': ['../src/z.ts', '../../bus/src/index.ts'],
};

const WORKSPACE = 'another workspace is imported by its package name (@ctxflow/<name>), never from its src/.';
const ADAPTERS = 'the domain reaches adapters through its ports (src/ports) only.';
const CLIENTS = 'the domain uses no client library: an adapter behind a port does.';
const SERVICE =
  'a service imports no other service: what two services share lives in a shared package (shared/*); only the composition root (services/embedded) wires services together.';

const dir = mkdtempSync(join(tmpdir(), 'ctxflow-import-rules-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function lint(): { path: string; line: number; message: string }[] {
  copyFileSync(join(ROOT, 'biome.json'), join(dir, 'biome.json'));
  for (const [path, modules] of Object.entries(PROBES)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    const lines = modules.map((module, i) => `import { n${i} } from '${module}';`);
    lines.push(`export const all = [${modules.map((_, i) => `n${i}`).join(', ')}];`, '');
    writeFileSync(join(dir, path), lines.join('\n'));
  }
  const run = spawnSync(process.execPath, [BIOME, 'lint', '--reporter=json', '--only=style/noRestrictedImports', '.'], {
    cwd: dir,
    encoding: 'utf8',
  });
  const report = JSON.parse(run.stdout) as {
    diagnostics: { category: string; message: string; location: { path: string; start: { line: number } } }[];
  };
  return report.diagnostics
    .map((d) => ({ path: d.location.path, line: d.location.start.line, message: d.message }))
    .sort((a, b) => a.path.localeCompare(b.path) || a.line - b.line);
}

describe('import rules', () => {
  it("refuse another workspace's src/, a service outside the composition root, and adapters, HTTP and client libraries in a domain", () => {
    const at = (path: string, module: string) => PROBES[path]!.indexOf(module) + 1;
    const domain = 'services/x/src/domain/probe.ts';
    const nested = 'services/x/src/domain/verifiers/probe.ts';
    const adapters = 'services/x/src/adapters/probe.ts';
    const shared = 'shared/y/src/probe.ts';
    const sharedDomain = 'shared/y/src/domain/probe.ts';
    const root = 'services/embedded/src/probe.ts';
    const domainTest = 'services/x/test/domain/probe.test.ts';
    const sharedTest = 'shared/y/test/probe.test.ts';
    expect(lint()).toEqual([
      { path: root, line: at(root, '../../x/src/a.ts'), message: WORKSPACE },
      { path: adapters, line: at(adapters, '../../../y/src/z.ts'), message: WORKSPACE },
      { path: adapters, line: at(adapters, '@ctxflow/y/src/z.ts'), message: WORKSPACE },
      { path: adapters, line: at(adapters, '../../../../shared/bus/src/index.ts'), message: WORKSPACE },
      { path: adapters, line: at(adapters, '@ctxflow/session-runner'), message: SERVICE },
      { path: domain, line: at(domain, '../adapters/store.ts'), message: ADAPTERS },
      { path: domain, line: at(domain, '../adapters/redis/scripts.ts'), message: ADAPTERS },
      { path: domain, line: at(domain, '../http/routes.ts'), message: ADAPTERS },
      { path: domain, line: at(domain, 'ioredis'), message: CLIENTS },
      { path: domain, line: at(domain, 'kafkajs'), message: CLIENTS },
      { path: domain, line: at(domain, '@platformatic/kafka'), message: CLIENTS },
      { path: domain, line: at(domain, 'fastify'), message: CLIENTS },
      { path: domain, line: at(domain, '@fastify/otel'), message: CLIENTS },
      { path: domain, line: at(domain, '../../../y/src/z.ts'), message: WORKSPACE },
      { path: domain, line: at(domain, '@ctxflow/bus/src/memory-bus.ts'), message: WORKSPACE },
      { path: domain, line: at(domain, '@ctxflow/feed-ingestor'), message: SERVICE },
      { path: nested, line: at(nested, '../../adapters/redis/keys.ts'), message: ADAPTERS },
      { path: nested, line: at(nested, '../../adapters/memory-delivery-ledger.ts'), message: ADAPTERS },
      { path: nested, line: at(nested, '../../http/feed-routes.ts'), message: ADAPTERS },
      { path: nested, line: at(nested, 'ioredis'), message: CLIENTS },
      { path: domainTest, line: at(domainTest, '../../../y/src/z.ts'), message: WORKSPACE },
      { path: domainTest, line: at(domainTest, '../../../../shared/bus/src/index.ts'), message: WORKSPACE },
      { path: domainTest, line: at(domainTest, '@ctxflow/bus/src/memory-bus.ts'), message: WORKSPACE },
      { path: sharedDomain, line: at(sharedDomain, '../adapters/a.ts'), message: ADAPTERS },
      { path: sharedDomain, line: at(sharedDomain, 'ioredis'), message: CLIENTS },
      { path: sharedDomain, line: at(sharedDomain, '@ctxflow/embedded'), message: SERVICE },
      { path: shared, line: at(shared, '../../../services/x/src/a.ts'), message: WORKSPACE },
      { path: shared, line: at(shared, '@ctxflow/step-context'), message: SERVICE },
      { path: sharedTest, line: at(sharedTest, '../../bus/src/index.ts'), message: WORKSPACE },
    ]);
  });
});
