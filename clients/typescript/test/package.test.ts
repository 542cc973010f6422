import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const PACKAGE = resolve('clients/typescript');
const work = mkdtempSync(join(tmpdir(), 'ctxflow-client-pack-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('@ctxflow/client as published', () => {
  it('packs with one runtime dependency; strict consumers type-check (with the SDKs: provider formats) and run its dist', () => {
    const manifest = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8'));
    // The stream's parser (follow); nothing else.
    expect(manifest.dependencies).toEqual({ 'eventsource-parser': '4.1.3' });
    expect(manifest.type).toBe('module');
    // The SDKs and runtimes are peers for their types only, each optional.
    expect(Object.keys(manifest.peerDependencies).sort()).toEqual([
      '@anthropic-ai/claude-agent-sdk',
      '@anthropic-ai/sdk',
      '@langchain/core',
      '@mastra/core',
      '@openai/agents',
      'ai',
      'langchain',
      'openai',
    ]);
    for (const peer of Object.keys(manifest.peerDependencies)) {
      expect(manifest.peerDependenciesMeta[peer]).toEqual({ optional: true });
    }

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
    // What npm installs beside it: its one dependency.
    symlinkSync(join(PACKAGE, 'node_modules/eventsource-parser'), join(work, 'node_modules', 'eventsource-parser'));

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
    // A provider format's request is the SDK's params: spread into its call, it type-checks as they are.
    writeFileSync(
      join(work, 'provider.ts'),
      [
        "import type Anthropic from '@anthropic-ai/sdk';",
        "import type OpenAI from 'openai';",
        "import type { CtxflowClient } from '@ctxflow/client';",
        'export async function both(client: CtxflowClient, anthropic: Anthropic, openai: OpenAI) {',
        "  const a = await client.step('s', { format: 'anthropic' });",
        "  const m = await anthropic.messages.create({ model: 'm', max_tokens: 1, ...a.request });",
        "  const c = await client.step('s', { format: 'openai-chat' });",
        "  const r = await openai.chat.completions.create({ model: 'm', ...c.request });",
        '  return [m.content, r.choices];',
        '}',
      ].join('\n'),
    );
    /** tsc's diagnostics for the files (empty when they type-check). */
    const tsc = (files: string[], options: Record<string, unknown> = {}): string[] => {
      const config = {
        compilerOptions: {
          strict: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          lib: ['es2022', 'dom'],
          types: [],
          noEmit: true,
          ...options,
        },
        files,
      };
      writeFileSync(join(work, 'tsconfig.json'), JSON.stringify(config));
      const run = spawnSync(process.execPath, [resolve('node_modules/typescript/bin/tsc'), '-p', work], {
        encoding: 'utf8',
      });
      return run.stdout.split('\n').filter((line) => line.includes('error TS'));
    };
    // Without the optional SDKs and with every library check, the dist's only errors are the SDK
    // modules the provider formats' types come from; skipping library checks, the consumer type-checks.
    expect(tsc(['consumer.ts']).map((line) => line.replace(/^.*error (TS\d+): ([^']*'[^']*').*$/, '$1 $2'))).toEqual([
      "TS2307 Cannot find module '@anthropic-ai/sdk/resources/messages'",
      "TS2307 Cannot find module 'openai/resources/chat/completions'",
      "TS2307 Cannot find module 'openai/resources/responses/responses'",
    ]);
    expect(tsc(['consumer.ts'], { skipLibCheck: true })).toEqual([]);
    // With the SDKs (the optional peers), a provider step's request spreads into their calls.
    for (const sdk of ['openai', '@anthropic-ai/sdk']) {
      mkdirSync(dirname(join(work, 'node_modules', sdk)), { recursive: true });
      symlinkSync(resolve('node_modules', sdk), join(work, 'node_modules', sdk));
    }
    expect(tsc(['consumer.ts', 'provider.ts'], { skipLibCheck: true })).toEqual([]);
    // With langchain installed, the LangChain middleware from the dist type-checks in createAgent and loads.
    for (const peer of ['langchain', '@langchain/core']) {
      mkdirSync(dirname(join(work, 'node_modules', peer)), { recursive: true });
      symlinkSync(resolve('node_modules', peer), join(work, 'node_modules', peer));
    }
    writeFileSync(
      join(work, 'langchain.ts'),
      [
        "import { CtxflowClient } from '@ctxflow/client';",
        "import { ctxflowMiddleware } from '@ctxflow/client/langchain';",
        "import { createAgent } from 'langchain';",
        "const client = new CtxflowClient({ baseURL: 'http://127.0.0.1:9' });",
        "const middleware = ctxflowMiddleware({ client, sessionId: 's' });",
        "export const agent = () => createAgent({ model: 'openai:gpt-5-mini', tools: [], middleware: [middleware] });",
        'console.log(middleware.name);',
      ].join('\n'),
    );
    // With the Claude Agent SDK installed, the iterable from the dist is a `query` prompt as it is.
    for (const peer of ['@anthropic-ai/claude-agent-sdk', '@modelcontextprotocol/sdk']) {
      mkdirSync(dirname(join(work, 'node_modules', peer)), { recursive: true });
      symlinkSync(resolve('node_modules', peer), join(work, 'node_modules', peer));
    }
    writeFileSync(
      join(work, 'claude-agent.ts'),
      [
        "import { query } from '@anthropic-ai/claude-agent-sdk';",
        "import { CtxflowClient } from '@ctxflow/client';",
        "import { ctxflowTurns } from '@ctxflow/client/claude-agent';",
        "const client = new CtxflowClient({ baseURL: 'http://127.0.0.1:9' });",
        "export const run = () => query({ prompt: ctxflowTurns({ client, sessionId: 's' }) });",
        'console.log(typeof ctxflowTurns);',
      ].join('\n'),
    );
    // One compiler run for both adapters (each run costs seconds on a loaded machine).
    expect(tsc(['langchain.ts', 'claude-agent.ts'], { skipLibCheck: true })).toEqual([]);
    const loaded = execFileSync(process.execPath, [join(work, 'langchain.ts')], { cwd: work, encoding: 'utf8' });
    expect(loaded.trim()).toBe('ctxflow');
    const turns = execFileSync(process.execPath, [join(work, 'claude-agent.ts')], { cwd: work, encoding: 'utf8' });
    expect(turns.trim()).toBe('function');
    // Node runs the consumer against the package's dist (no source condition).
    const out = execFileSync(process.execPath, [join(work, 'consumer.ts')], { cwd: work, encoding: 'utf8' });
    expect(out.trim()).toBe('function not_found');
  }, 240_000);
});
