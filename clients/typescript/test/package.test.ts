import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const PACKAGE = resolve('clients/typescript');
const work = mkdtempSync(join(tmpdir(), 'ctxflow-client-pack-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('@ctxflow/client as published', () => {
  it('packs with no runtime dependency; a strict consumer type-checks and runs its dist (ESM, types)', () => {
    const manifest = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8'));
    expect(manifest.dependencies).toBeUndefined();
    expect(manifest.type).toBe('module');

    // `npm pack` runs the build (prepack) and packs what `files` names.
    const packed = execFileSync('npm', ['pack', '--silent', '--pack-destination', work], {
      cwd: PACKAGE,
      encoding: 'utf8',
    })
      .trim()
      .split('\n')
      .at(-1)!;
    const installed = join(work, 'node_modules', '@ctxflow');
    mkdirSync(installed, { recursive: true });
    execFileSync('tar', ['xzf', join(work, packed), '-C', installed]);
    execFileSync('mv', [join(installed, 'package'), join(installed, 'client')]);

    writeFileSync(join(work, 'package.json'), '{"type":"module"}');
    writeFileSync(
      join(work, 'consumer.ts'),
      [
        "import { CtxflowApiError, CtxflowClient, type NeutralStepAnswer } from '@ctxflow/client';",
        "const client = new CtxflowClient({ baseURL: 'http://127.0.0.1:9' });",
        "const next = (): Promise<NeutralStepAnswer> => client.step('s', { format: 'neutral' });",
        "console.log(typeof next, new CtxflowApiError(404, 'not_found', 'no route', false).code);",
      ].join('\n'),
    );
    writeFileSync(
      join(work, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          lib: ['es2022', 'dom'],
          types: [],
          noEmit: true,
        },
        files: ['consumer.ts'],
      }),
    );
    execFileSync(process.execPath, [resolve('node_modules/typescript/bin/tsc'), '-p', work], { encoding: 'utf8' });
    // Node runs the consumer against the package's dist (no source condition).
    const out = execFileSync(process.execPath, [join(work, 'consumer.ts')], { cwd: work, encoding: 'utf8' });
    expect(out.trim()).toBe('function not_found');
  }, 120_000);
});
