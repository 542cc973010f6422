import { createHash } from 'node:crypto';
import { type FSWatcher, readFileSync, type Stats, statSync, watch } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Logger } from './logger.ts';

/** The scopes a caller can hold; each route declares the one it needs. */
export const SCOPES = ['ctxflow:read', 'ctxflow:write', 'ctxflow:admin'] as const;
export type Scope = (typeof SCOPES)[number];
/** The scopes by what they allow: reads, every write, erasure with cascade (and dead-letter replay). */
export const SCOPE = { read: 'ctxflow:read', write: 'ctxflow:write', admin: 'ctxflow:admin' } as const satisfies Record<
  string,
  Scope
>;
export const ALL_SCOPES: ReadonlySet<Scope> = new Set(SCOPES);

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** The longest tenant name a key entry may give (the TicketUpdate's limit). */
const MAX_TENANT_LENGTH = 256;

/** One accepted API key, known by the SHA-256 of the key only. */
export interface ApiKeyEntry {
  tenant: string;
  /** Hex SHA-256 of the key. */
  hash: string;
  scopes: ReadonlySet<Scope>;
  /** The first 12 hex digits of the hash: names the key in logs and audit lines. */
  keyId: string;
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** A short, non-secret name of a key: the first 12 hex digits of its SHA-256. */
export function keyIdOf(hash: string): string {
  return hash.slice(0, 12);
}

function entry(tenant: string, hash: string, scopes: ReadonlySet<Scope>): ApiKeyEntry {
  return Object.freeze({ tenant, hash, scopes, keyId: keyIdOf(hash) });
}

/** Entries from `CTXFLOW_API_KEYS`'s `key -> tenant` map (parseApiKeys): every scope. */
export function entriesOfKeyMap(keys: ReadonlyMap<string, string>): ApiKeyEntry[] {
  return [...keys].map(([key, tenant]) => entry(tenant, sha256Hex(key), ALL_SCOPES));
}

const HEX_SHA256 = /^[0-9a-f]{64}$/i;

/**
 * Parses a key file (`CTXFLOW_API_KEYS_FILE`): one entry a line, `tenant:key` or
 * `tenant:sha256:<hex of the key>`, optionally followed by whitespace and the key's scopes
 * (space-separated; none named: every scope). `#` starts a comment; blank lines are skipped.
 * Throws one Error naming the file and each bad line's number and problem, never the key.
 */
export function parseKeyFile(text: string, file: string): ApiKeyEntry[] {
  const entries: ApiKeyEntry[] = [];
  const problems: string[] = [];
  const tenantOf = new Map<string, string>();
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const problem = (message: string) => problems.push(`${file} line ${i + 1}: ${message}`);
    const hashAt = lines[i]!.indexOf('#');
    const line = (hashAt < 0 ? lines[i]! : lines[i]!.slice(0, hashAt)).trim();
    if (line === '') continue;
    const [credential, ...scopeWords] = line.split(/\s+/);
    const colon = credential!.indexOf(':');
    if (colon <= 0 || colon === credential!.length - 1) {
      problem('expected tenant:key or tenant:sha256:<64 hex digits>, then optional scopes');
      continue;
    }
    const tenant = credential!.slice(0, colon);
    const key = credential!.slice(colon + 1);
    if (tenant.length > MAX_TENANT_LENGTH) {
      problem(`the tenant is longer than ${MAX_TENANT_LENGTH} characters`);
      continue;
    }
    let hash: string;
    if (key.startsWith('sha256:')) {
      const hex = key.slice('sha256:'.length);
      if (!HEX_SHA256.test(hex)) {
        problem("a sha256: entry takes the 64 hex digits of the key's SHA-256");
        continue;
      }
      hash = hex.toLowerCase();
    } else {
      hash = sha256Hex(key);
    }
    const unknown = scopeWords.filter((word) => !isScope(word));
    if (unknown.length > 0) {
      problem(`${unknown.length} unknown scope(s): the scopes are ${SCOPES.join(', ')}`);
      continue;
    }
    const previous = tenantOf.get(hash);
    if (previous !== undefined && previous !== tenant) {
      problem(`the same key is given to tenants "${previous}" and "${tenant}": a key names one tenant`);
      continue;
    }
    if (previous !== undefined) {
      problem('the same key is listed twice');
      continue;
    }
    tenantOf.set(hash, tenant);
    const scopes = scopeWords.length === 0 ? ALL_SCOPES : new Set(scopeWords as Scope[]);
    entries.push(entry(tenant, hash, scopes));
  }
  if (problems.length > 0) throw new Error(problems.join('; '));
  return entries;
}

/** Reads and parses a key file; a file that cannot be read is an Error naming it. */
export function readKeyFile(file: string): ApiKeyEntry[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`${file}: cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return parseKeyFile(text, file);
}

/**
 * The accepted keys, by the SHA-256 of the key: a lookup hashes the presented key once and
 * reads one Map entry, whatever the number of keys (no scan, no comparison with each key).
 */
export class ApiKeyRing {
  #byHash = new Map<string, ApiKeyEntry>();

  constructor(entries: readonly ApiKeyEntry[] = []) {
    this.replace(entries);
  }

  /** Swaps every key at once: a request sees the old set or the new one, never a mix. */
  replace(entries: readonly ApiKeyEntry[]): void {
    const next = new Map<string, ApiKeyEntry>();
    for (const e of entries) if (!next.has(e.hash)) next.set(e.hash, e);
    this.#byHash = next;
  }

  get size(): number {
    return this.#byHash.size;
  }

  lookup(key: string): ApiKeyEntry | undefined {
    return this.#byHash.get(sha256Hex(key));
  }
}

/** How often the key file is stat'ed besides fs.watch (which misses some changes: NFS, some bind mounts). */
export const KEY_FILE_POLL_MS = 1_000;

export interface KeyFileWatch {
  /** Reads the file now if it changed (the poll and fs.watch call it); resolves when applied. */
  check(force?: boolean): void;
  close(): void;
}

function sameFile(a: Stats | undefined, b: Stats): boolean {
  return a !== undefined && a.mtimeMs === b.mtimeMs && a.size === b.size && a.ino === b.ino && a.ctimeMs === b.ctimeMs;
}

/**
 * Keeps `ring` in step with the key file: fs.watch on its directory (a Kubernetes secret or an
 * editor replaces the file by a rename) and a stat every `pollMs`, so a change applies within
 * about a second with no restart. Each reload replaces `fixed` plus the file's entries; a file
 * that cannot be read or parsed keeps the keys in use and the problem is logged (never a key).
 * `onReload` is told each reload's outcome (the audit line).
 */
export function watchKeyFile(options: {
  file: string;
  ring: ApiKeyRing;
  fixed: readonly ApiKeyEntry[];
  log?: Logger;
  pollMs?: number;
  onReload?: (outcome: { ok: boolean; keys: number; problem?: string }) => void;
}): KeyFileWatch {
  const { file, ring, fixed, log } = options;
  let last: Stats | undefined;
  let applied: string | undefined;
  try {
    last = statSync(file);
    applied = sha256Hex(readFileSync(file, 'utf8'));
  } catch {}
  let lastProblem: string | undefined;
  const refuse = (problem: string) => {
    if (problem === lastProblem) return;
    lastProblem = problem;
    log?.warn({ file, problem }, 'API key file: reload refused, the keys in use are kept');
    options.onReload?.({ ok: false, keys: ring.size - fixed.length, problem });
  };
  const check = (force = false) => {
    let stats: Stats;
    let text: string;
    try {
      stats = statSync(file);
      if (!force && sameFile(last, stats)) return;
      text = readFileSync(file, 'utf8');
    } catch (err) {
      refuse(`${file}: cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
      return;
    }
    last = stats;
    const digest = sha256Hex(text);
    if (digest === applied && lastProblem === undefined) return;
    try {
      const entries = parseKeyFile(text, file);
      ring.replace([...fixed, ...entries]);
      applied = digest;
      lastProblem = undefined;
      log?.info({ file, keys: entries.length }, 'API key file: reloaded');
      options.onReload?.({ ok: true, keys: entries.length });
    } catch (err) {
      refuse((err as Error).message);
    }
  };
  let watcher: FSWatcher | undefined;
  try {
    const name = basename(file);
    watcher = watch(dirname(file), { persistent: false }, (_event, changed) => {
      if (changed === null || changed === name || changed.startsWith('..')) check(true);
    });
    watcher.on('error', () => watcher?.close());
  } catch {
    // The poll alone then.
  }
  const timer = setInterval(() => check(), options.pollMs ?? KEY_FILE_POLL_MS);
  timer.unref();
  return {
    check,
    close() {
      clearInterval(timer);
      watcher?.close();
    },
  };
}
