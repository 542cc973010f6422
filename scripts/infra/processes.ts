/** Processes, pid files, machine-wide locks, and waiting for a check. */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LOCK_TIMEOUT_MS, LOCKS_DIR, log, ROOT, STOP_TIMEOUT_MS, sleep } from './settings.ts';

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Command line of a live process, '' when gone (Linux /proc). */
export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

/** Pid from a pid file when that process is alive and its command line contains `expect`; else undefined. */
export async function livePid(pidFile: string, expect: string): Promise<number | undefined> {
  let text: string;
  try {
    text = await readFile(pidFile, 'utf8');
  } catch {
    return undefined;
  }
  const pid = Number.parseInt(text.trim(), 10);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  if (!isAlive(pid) || !commandLine(pid).includes(expect)) return undefined;
  return pid;
}

/** SIGTERM, then SIGKILL after `timeoutMs`; resolves once the process is gone. */
export async function stopPid(pid: number, what: string, timeoutMs = STOP_TIMEOUT_MS): Promise<void> {
  if (!isAlive(pid)) return;
  log(`stopping ${what} (pid ${pid})`);
  try {
    process.kill(pid, 'SIGTERM');
  } catch {
    return;
  }
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid) && !isZombie(pid)) {
    if (Date.now() > deadline) {
      log(`${what} (pid ${pid}) ignored SIGTERM for ${timeoutMs} ms: SIGKILL`);
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        return;
      }
      await sleep(200);
      return;
    }
    await sleep(100);
  }
}

/** A zombie has exited but waits for its parent to reap it: gone for our purposes. */
export function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
}

/**
 * Runs `fn` holding the lock `name`: a directory made atomically with mkdir, holding
 * the owner's pid. A lock whose owner died is taken over.
 */
export async function withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
  await mkdir(LOCKS_DIR, { recursive: true });
  const dir = join(LOCKS_DIR, name);
  const deadline = Date.now() + LOCK_TIMEOUT_MS;
  let waited = false;
  for (;;) {
    try {
      await mkdir(dir);
      await writeFile(join(dir, 'owner'), String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (await lockIsStale(dir)) {
        await rm(dir, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline)
        throw new Error(`infra: timed out after ${LOCK_TIMEOUT_MS} ms waiting for lock ${dir}`);
      if (!waited) log(`waiting for lock ${name} (held by another process)`);
      waited = true;
      await sleep(200);
    }
  }
  try {
    return await fn();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function lockIsStale(dir: string): Promise<boolean> {
  try {
    const owner = Number.parseInt(await readFile(join(dir, 'owner'), 'utf8'), 10);
    return !Number.isInteger(owner) || !isAlive(owner);
  } catch {
    // Owner file not written yet, or the lock vanished: stale only if it has been like that for a while.
    try {
      return Date.now() - (await stat(dir)).mtimeMs > 10_000;
    } catch {
      return false;
    }
  }
}

/** Resolves once `check` answers true; rejects after `timeoutMs` naming `what`. */
export async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`infra: ${what} not ready after ${timeoutMs} ms`);
    await sleep(150);
  }
}

/**
 * Runs a command to completion without blocking the event loop (the services are provisioned
 * concurrently: a synchronous Maven run would stall the other readiness checks).
 */
export function run(command: string, args: readonly string[], what: string): Promise<string> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.once('error', (err) => fail(new Error(`infra: ${what}: cannot run ${command}: ${err.message}`)));
    child.once('close', (code, signal) => {
      if (code === 0) done(output);
      else {
        fail(
          new Error(
            `infra: ${what} failed (${signal ?? `exit ${code}`}): ${command} ${args.join(' ')}\n${output.slice(-4000)}`,
          ),
        );
      }
    });
  });
}
