import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, type Stats, statSync } from 'node:fs';
import type { z } from 'zod';

/** The least length of a service token (about 190 bits as base64url). */
export const MIN_SERVICE_TOKEN_LENGTH = 32;

/**
 * The tokens of `CTXFLOW_SERVICE_TOKEN_FILE`, one a line (`#` comments, blank lines
 * skipped). The caller sends the first; the callee accepts any, so a token rotates by
 * adding the new one second, then first, then removing the old one. Throws an Error naming
 * the file (never a token) when it cannot be read or a token is too short.
 */
export function parseServiceTokens(text: string, file: string): string[] {
  const tokens = text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  if (tokens.length === 0) throw new Error(`${file}: no token in it`);
  const short = tokens.findIndex((t) => t.length < MIN_SERVICE_TOKEN_LENGTH || /\s/.test(t));
  if (short >= 0) {
    throw new Error(
      `${file}: token ${short + 1} is shorter than ${MIN_SERVICE_TOKEN_LENGTH} characters or has a space`,
    );
  }
  return tokens;
}

function read(file: string): string[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`${file}: cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  return parseServiceTokens(text, file);
}

const digest = (token: string) => createHash('sha256').update(token).digest();

/**
 * A service token file kept current: each use stats the file and reads it again when it
 * changed, so a rotated token applies with no restart; a file that became unreadable or
 * invalid keeps the tokens read last.
 */
export class ServiceTokens {
  readonly file: string;
  #tokens: string[];
  #digests: Buffer[];
  #stats: Stats | undefined;

  /** Reads the file now; throws (naming the file, never a token) when it is unusable. */
  constructor(file: string) {
    this.file = file;
    this.#stats = statSync(file, { throwIfNoEntry: false });
    this.#tokens = read(file);
    this.#digests = this.#tokens.map(digest);
  }

  #refresh(): void {
    const stats = statSync(this.file, { throwIfNoEntry: false });
    if (!stats || (this.#stats && stats.mtimeMs === this.#stats.mtimeMs && stats.size === this.#stats.size)) return;
    this.#stats = stats;
    try {
      this.#tokens = read(this.file);
      this.#digests = this.#tokens.map(digest);
    } catch {
      // Kept: the tokens read last.
    }
  }

  /** The token a caller sends. */
  current(): string {
    this.#refresh();
    return this.#tokens[0]!;
  }

  /** Whether `presented` is one of the tokens, compared in constant time. */
  accepts(presented: string): boolean {
    this.#refresh();
    const given = digest(presented);
    let ok = false;
    for (const d of this.#digests) if (timingSafeEqual(d, given)) ok = true;
    return ok;
  }
}

/**
 * A config transform's step: `CTXFLOW_SERVICE_TOKEN_FILE` read into ServiceTokens, or an
 * issue naming the variable (and the file, never a token); absent: undefined.
 */
export function serviceTokensOf(file: string | undefined, ctx: z.RefinementCtx): ServiceTokens | undefined {
  if (!file) return undefined;
  try {
    return new ServiceTokens(file);
  } catch (err) {
    ctx.addIssue({ code: 'custom', path: ['CTXFLOW_SERVICE_TOKEN_FILE'], message: (err as Error).message });
    return undefined;
  }
}
