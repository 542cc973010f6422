/**
 * No circular import in the repository's TypeScript: dependency-cruiser with the
 * repository's configuration (.dependency-cruiser.cjs), over what `npm run deps` names
 * (`npm run check` runs it too). Type-only imports count: a cycle of types is still one
 * module needing the other.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const DEPCRUISE = join(ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruiser.mjs');

/** The folders `npm run deps` cruises (package.json's script, so there is one list). */
function cruised(): string[] {
  const { scripts } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const [command, ...args] = scripts.deps!.split(/\s+/);
  expect(command).toBe('depcruise');
  return args.slice(
    0,
    args.findIndex((arg) => arg.startsWith('--')),
  );
}

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
  cycle?: { name: string }[];
}

function cruise(cwd: string, targets: string[]): { violations: Violation[]; totalCruised: number } {
  const run = spawnSync(process.execPath, [DEPCRUISE, ...targets, '--output-type', 'json'], {
    cwd,
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  if (!run.stdout) throw new Error(`depcruise printed nothing: ${run.stderr}`);
  return (JSON.parse(run.stdout) as { summary: { violations: Violation[]; totalCruised: number } }).summary;
}

const probe = mkdtempSync(join(tmpdir(), 'ctxflow-import-cycles-'));
afterAll(() => rmSync(probe, { recursive: true, force: true }));

describe('import cycles', () => {
  it('none in the repository', () => {
    const targets = cruised();
    expect(targets).toEqual(['shared', 'services', 'clients', 'scripts', 'bench', 'test', 'examples']);
    const summary = cruise(ROOT, targets);
    expect(summary.totalCruised).toBeGreaterThan(300);
    expect(summary.violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`)).toEqual([]);
  });

  it('a cycle is found, through a type-only import too, and reported once', () => {
    copyFileSync(join(ROOT, '.dependency-cruiser.cjs'), join(probe, '.dependency-cruiser.cjs'));
    copyFileSync(join(ROOT, 'tsconfig.json'), join(probe, 'tsconfig.json'));
    const src = join(probe, 'shared', 'y', 'src');
    mkdirSync(src, { recursive: true });
    writeFileSync(join(src, 'a.ts'), "import { b } from './b.ts';\nexport const a = () => b;\n");
    writeFileSync(join(src, 'b.ts'), "import type { c } from './c.ts';\nexport const b: typeof c = 1;\n");
    writeFileSync(join(src, 'c.ts'), "import { a } from './a.ts';\nexport const c = 1;\nexport const d = a;\n");
    writeFileSync(join(src, 'leaf.ts'), "import { a } from './a.ts';\nexport const leaf = a;\n");
    const found = cruise(probe, ['shared']).violations.map((v) => ({
      rule: v.rule.name,
      from: v.from,
      cycle: v.cycle?.map((step) => step.name),
    }));
    expect(found).toEqual([
      {
        rule: 'no-circular',
        from: 'shared/y/src/a.ts',
        cycle: ['shared/y/src/b.ts', 'shared/y/src/c.ts', 'shared/y/src/a.ts'],
      },
    ]);
  });
});
