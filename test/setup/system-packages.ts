/**
 * Vitest global setup: the system programs some suites drive, installed from Debian when the
 * machine lacks them, so `npm test` runs on a fresh machine by itself:
 *   - `chromium` for the inspector's browser test (`*.browser.test.ts`, driven by playwright-core);
 *   - `openssl` for the throwaway CA and certificates of the secured-connection tests
 *     (test/support/secured-services.ts).
 * Only what a selected test file needs is looked at (a unit-test run installs nothing). A missing
 * program is installed with `apt-get install` (as root, or through `sudo -n`); where neither is
 * possible the run stops here with the one command that installs it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { TestProject } from 'vitest/node';

interface SystemPackage {
  /** The program the tests run. */
  command: string;
  /** Debian's package that has it. */
  debian: string;
  /** Whether a selected test file needs it. */
  neededBy(file: string, source: string): boolean;
}

export const SYSTEM_PACKAGES: readonly SystemPackage[] = [
  { command: 'chromium', debian: 'chromium', neededBy: (file) => file.endsWith('.browser.test.ts') },
  {
    command: 'openssl',
    debian: 'openssl',
    neededBy: (_file, source) => source.includes('secured-services.ts'),
  },
];

function note(message: string): void {
  process.stderr.write(`[system packages] ${message}\n`);
}

function installed(command: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;
}

/** The packages the selected files need and this machine lacks. */
export function missingPackages(
  files: readonly string[],
  has: (command: string) => boolean = installed,
  read: (file: string) => string = (file) => readFileSync(file, 'utf8'),
): SystemPackage[] {
  return SYSTEM_PACKAGES.filter((pkg) => {
    if (has(pkg.command)) return false;
    // An empty selection could not be read: look at every package rather than fail later.
    if (files.length === 0) return true;
    return files.some((file) => {
      let source = '';
      try {
        source = read(file);
      } catch {}
      return pkg.neededBy(file, source);
    });
  });
}

/** How to run apt-get here: directly as root, through passwordless sudo, or not at all. */
function aptPrefix(): string[] | undefined {
  if (process.getuid?.() === 0) return [];
  return spawnSync('sudo', ['-n', 'true'], { stdio: 'ignore' }).status === 0 ? ['sudo', '-n'] : undefined;
}

function run(prefix: string[], args: string[]): void {
  const [command, ...rest] = [...prefix, ...args];
  execFileSync(command!, rest, {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
}

export default function setup(project: TestProject): void {
  let files: string[] = [];
  try {
    files = project.vitest.state.getPaths();
  } catch {}
  const missing = missingPackages(files);
  if (missing.length === 0) return;
  const names = missing.map((pkg) => pkg.debian);
  const prefix = aptPrefix();
  if (prefix === undefined) {
    throw new Error(
      `the selected tests need ${missing.map((pkg) => pkg.command).join(' and ')}, which this machine lacks; ` +
        `install with: sudo apt-get update && sudo apt-get install -y ${names.join(' ')}`,
    );
  }
  const started = Date.now();
  note(`installing Debian's ${names.join(', ')} (needed by the selected tests; about a minute)`);
  run(prefix, ['apt-get', 'update', '-qq']);
  run(prefix, ['apt-get', 'install', '-y', '-qq', ...names]);
  for (const pkg of missing) {
    if (!installed(pkg.command)) throw new Error(`apt-get installed ${pkg.debian}, but ${pkg.command} is not on PATH`);
  }
  note(`installed ${names.join(', ')} in ${Date.now() - started} ms`);
}
