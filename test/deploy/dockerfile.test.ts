/**
 * The Dockerfile, checked without a Docker engine: the syntax and instruction checks of
 * dockerfile-utils (the Dockerfile language server's validator), then what this image
 * promises: stages, Node 24 slim, production dependencies of every workspace from the
 * lockfile, a non-root user, a health check, entry points and copied paths that exist.
 * The health check commands (the image's and compose's) are run against a local server.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { DockerfileParser, type From, type Instruction } from 'dockerfile-ast';
import { ValidationSeverity, validate } from 'dockerfile-utils';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ROOT } from './kube-schemas.ts';

const DOCKERFILE = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
const ENTRY_POINTS = ['embedded', 'session-runner', 'feed-ingestor', 'step-context'].map(
  (s) => `services/${s}/src/main.ts`,
);

/** The workspace folders, as npm expands package.json `workspaces`. */
function workspaces(): string[] {
  const { workspaces: globs } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    workspaces: string[];
  };
  return globs.flatMap((glob) => {
    const parent = glob.replace(/\/\*$/, '');
    return readdirSync(join(ROOT, parent))
      .map((name) => `${parent}/${name}`)
      .filter((dir) => existsSync(join(ROOT, dir, 'package.json')));
  });
}

interface Stage {
  name: string | null;
  image: string;
  instructions: Instruction[];
}

function stages(text: string): Stage[] {
  const dockerfile = DockerfileParser.parse(text);
  const args = new Map(
    dockerfile.getInitialARGs().map((a) => [a.getProperty()?.getName(), a.getProperty()?.getValue()]),
  );
  const result: Stage[] = [];
  for (const instruction of dockerfile.getInstructions()) {
    if (instruction.getKeyword() === 'FROM') {
      const from = instruction as From;
      const image = (from.getImage() ?? '').replace(/\$\{(\w+)\}/g, (_, name: string) => args.get(name) ?? '');
      result.push({ name: from.getBuildStage(), image, instructions: [] });
    } else {
      result.at(-1)?.instructions.push(instruction);
    }
  }
  return result;
}

const args = (i: Instruction) => i.getArguments().map((a) => a.getValue());
const flag = (i: Instruction, name: string) =>
  (i as Instruction & { getFlags?: () => { getName(): string; getValue(): string | null }[] })
    .getFlags?.()
    .find((f) => f.getName() === name)
    ?.getValue();

/** Every problem of a Dockerfile text, as readable lines; empty when it is fine. */
function lintDockerfile(text: string): string[] {
  const problems: string[] = [];
  for (const d of validate(text, { instructionCasing: ValidationSeverity.ERROR })) {
    problems.push(`line ${d.range.start.line + 1}: ${d.message}`);
  }
  const all = stages(text);
  const names = all.map((s) => s.name);
  if (JSON.stringify(names) !== JSON.stringify(['base', 'deps', 'runtime'])) {
    problems.push(`stages are ${JSON.stringify(names)}, expected ["base","deps","runtime"]`);
  }
  if (all[0]?.image !== 'node:24-slim') problems.push(`base image is "${all[0]?.image}", expected node:24-slim`);
  for (const stage of all.slice(1)) {
    if (stage.image !== 'base') problems.push(`stage ${stage.name} is not built FROM base`);
  }

  const deps = all.find((s) => s.name === 'deps');
  const install = deps?.instructions.find((i) => i.getKeyword() === 'RUN' && /\bnpm ci\b/.test(args(i).join(' ')));
  if (!install || !args(install).includes('--omit=dev')) problems.push('deps: no `npm ci --omit=dev`');
  const manifests = new Set(
    (deps?.instructions ?? []).filter((i) => i.getKeyword() === 'COPY').flatMap((i) => args(i).slice(0, -1)),
  );
  for (const needed of ['package.json', 'package-lock.json', ...workspaces().map((w) => `${w}/package.json`)]) {
    if (!manifests.has(needed)) problems.push(`deps: ${needed} is not copied before npm ci`);
  }

  // Sources copied from the build context exist (a typo would fail the build).
  for (const stage of all) {
    for (const copy of stage.instructions.filter((i) => ['COPY', 'ADD'].includes(i.getKeyword()))) {
      if (flag(copy, 'from') !== undefined) continue;
      for (const source of args(copy).slice(0, -1)) {
        if (!existsSync(join(ROOT, source))) problems.push(`${stage.name}: COPY source ${source} does not exist`);
      }
    }
  }

  const runtime = all.at(-1);
  const users = (runtime?.instructions ?? []).filter((i) => i.getKeyword() === 'USER').map((i) => args(i)[0] ?? '');
  const user = users.at(-1);
  if (!user || /^(root|0)(:|$)/.test(user)) problems.push(`runtime: runs as ${user ?? 'root (no USER)'}`);
  const healthcheck = runtime?.instructions.find((i) => i.getKeyword() === 'HEALTHCHECK');
  if (!healthcheck || !/\bCMD\b/.test(healthcheck.getRawArgumentsContent() ?? '')) {
    problems.push('runtime: no HEALTHCHECK CMD');
  }
  const cmd = runtime?.instructions.filter((i) => i.getKeyword() === 'CMD').at(-1);
  let command: unknown;
  try {
    command = JSON.parse(cmd?.getArgumentsContent() ?? '');
  } catch {
    problems.push('runtime: CMD is not in exec form (SIGTERM would reach a shell, not node)');
  }
  if (Array.isArray(command) && !(command[0] === 'node' && existsSync(join(ROOT, String(command[1]))))) {
    problems.push(`runtime: CMD ${JSON.stringify(command)} does not run an existing entry point with node`);
  }
  return problems;
}

/** The image's HEALTHCHECK command: `node -e <script>`. */
function healthcheckScript(text: string): string {
  const runtime = stages(text).at(-1)!;
  const raw = runtime.instructions.find((i) => i.getKeyword() === 'HEALTHCHECK')!.getRawArgumentsContent()!;
  const exec = JSON.parse(raw.slice(raw.indexOf('CMD') + 3).replace(/\\\n/g, '')) as string[];
  expect(exec.slice(0, 2)).toEqual(['node', '-e']);
  return exec[2]!;
}

function runNode(script: string, env: Record<string, string>): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script], { env: { ...process.env, ...env }, stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', resolve);
  });
}

describe('Dockerfile', () => {
  it('passes the lint: stages, node:24-slim, workspaces from the lockfile, non-root, health check', () => {
    expect(lintDockerfile(DOCKERFILE)).toEqual([]);
  });

  it('the entry points the container command picks exist', () => {
    expect(ENTRY_POINTS.filter((p) => !existsSync(join(ROOT, p)))).toEqual([]);
    for (const entry of ENTRY_POINTS) expect(DOCKERFILE).toContain(`node ${entry}`);
  });

  it('.dockerignore keeps node_modules and local state out, and nothing the build copies', () => {
    const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    expect(ignored).toEqual(expect.arrayContaining(['**/node_modules', '.git', '.infra']));
    for (const copied of ['package.json', 'package-lock.json', 'shared', 'services']) {
      expect(ignored, copied).not.toContain(copied);
    }
  });

  it('refuses a broken copy: root user, shell-form CMD, a misspelled flag, a workspace left out', () => {
    const broken = DOCKERFILE.replace('USER 1000:1000', 'USER root')
      .replace('CMD ["node", "services/embedded/src/main.ts"]', 'CMD node services/embedded/src/main.ts')
      .replace('HEALTHCHECK --interval=10s', 'HEALTHCHECK --intervl=10s')
      .replace('COPY shared/telemetry/package.json shared/telemetry/\n', '');
    expect(broken).not.toBe(DOCKERFILE);
    const brokenLine = broken.split('\n').findIndex((l) => l.includes('--intervl')) + 1;
    expect(lintDockerfile(broken)).toEqual([
      `line ${brokenLine}: Unknown flag: intervl`,
      'deps: shared/telemetry/package.json is not copied before npm ci',
      'runtime: runs as root',
      'runtime: CMD is not in exec form (SIGTERM would reach a shell, not node)',
    ]);
  });

  describe('health check commands, run with node against a local server', () => {
    let server: ReturnType<typeof createServer>;
    let base = '';
    beforeAll(async () => {
      server = createServer((req, res) => {
        res.statusCode = req.url === '/healthz' || req.url === '/readyz' ? 200 : 503;
        res.end();
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(() => new Promise<void>((r) => server.close(() => r())));

    it("the image's HEALTHCHECK exits 0 on 200, 1 on 503 and 1 when nothing listens", async () => {
      const script = healthcheckScript(DOCKERFILE);
      expect(await runNode(script, { CTXFLOW_HEALTH_URL: `${base}/healthz` })).toBe(0);
      expect(await runNode(script, { CTXFLOW_HEALTH_URL: `${base}/down` })).toBe(1);
      expect(await runNode(script, { CTXFLOW_HEALTH_URL: 'http://127.0.0.1:1/healthz' })).toBe(1);
    });

    it("compose's service health checks exit 0 on 200 and 1 on 503", async () => {
      const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
        services: Record<string, { healthcheck?: { test?: string[] } }>;
      };
      for (const name of ['session-runner', 'feed-ingestor', 'step-context']) {
        const test = compose.services[name]!.healthcheck!.test!;
        expect(test.slice(0, 3)).toEqual(['CMD', 'node', '-e']);
        const script = test[3]!;
        const url = /http:\/\/127\.0\.0\.1:\d+/.exec(script)![0];
        expect(await runNode(script.replace(url, base), {})).toBe(0);
        expect(await runNode(script.replace(url, base).replace('/readyz', '/down'), {})).toBe(1);
      }
    });
  });
});
