import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';
import { CtxflowError } from '@ctxflow/contracts';

/** Request headers as fastify gives them: lower-case names. */
export type Headers = Record<string, string | string[] | undefined>;

/** What a verifier sees: the exact bytes the sender signed. */
export interface SignedRequest {
  headers: Headers;
  rawBody: Buffer;
}

/**
 * A feed's HMAC secret: the configured string (UTF-8), or the key made of it
 * once by `secretKey` (a string is turned into a key on every signature).
 */
export type Secret = string | KeyObject;

/**
 * Checks one sender's signature scheme over the raw body against the feed's
 * secrets (one, or one list: every tenant's of a multi-tenant feed). Returns
 * the index of the secret that verified the request (0 for a single secret);
 * throws `unauthorized` when none does. Every secret is tried, each in
 * constant time, whichever matches: the time taken does not tell which
 * secret, or how much of a signature, was right. `nowMs` is epoch
 * milliseconds, for schemes that sign a timestamp.
 */
export type Verifier = (request: SignedRequest, secrets: Secret | readonly Secret[], nowMs: number) => number;

/** A secret or a list of them, as a list. */
export function secretList(secrets: Secret | readonly Secret[]): readonly Secret[] {
  return Array.isArray(secrets) ? secrets : [secrets as Secret];
}

/**
 * The index of the expected digest equal to `given`, comparing against every
 * one in constant time (no early exit); -1 when none is. Digests of another
 * length than `given` never match (and never reach `timingSafeEqual`, which
 * throws on unequal lengths).
 */
export function matchingDigest(given: Buffer, expected: readonly Buffer[]): number {
  let found = -1;
  for (let i = 0; i < expected.length; i++) {
    const digest = expected[i]!;
    if (digest.length === given.length && timingSafeEqual(given, digest) && found < 0) found = i;
  }
  return found;
}

/** The HMAC key of a configured secret: the same key as the string gives `createHmac`, made once. */
export function secretKey(secret: string): KeyObject {
  return createSecretKey(secret, 'utf8');
}

/** Signed timestamps older or newer than this are refused (replay window), in seconds. */
export const TIMESTAMP_TOLERANCE_S = 300;

export function unauthorized(message: string): CtxflowError {
  return new CtxflowError('unauthorized', message);
}

/** One header's value; a repeated header is refused rather than guessed at. */
export function singleHeader(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  if (Array.isArray(value)) return value.length === 1 ? value[0] : undefined;
  return value;
}

export function requireHeader(headers: Headers, name: string): string {
  const value = singleHeader(headers, name);
  if (value === undefined || value === '') throw unauthorized(`missing ${name} header`);
  return value;
}

export function hmacSha256(secret: Secret, ...parts: (string | Buffer)[]): Buffer {
  const mac = createHmac('sha256', secret);
  for (const part of parts) mac.update(part);
  return mac.digest();
}

const SHA256_HEX = /^sha256=([0-9a-fA-F]{64})$/;

/**
 * Compares `sha256=<hex>` against the expected digest of each secret in
 * constant time, and returns the index of the one it equals. The format (and
 * so the length) is checked first: `timingSafeEqual` throws on unequal
 * lengths, which must be a 401, never a 500.
 */
export function checkHexSignature(header: string, name: string, expected: readonly Buffer[]): number {
  const match = SHA256_HEX.exec(header.trim());
  if (!match) throw unauthorized(`${name}: expected sha256=<64 hex digits>`);
  const found = matchingDigest(Buffer.from(match[1]!, 'hex'), expected);
  if (found < 0) throw unauthorized(`${name}: signature does not match the body`);
  return found;
}

/** Refuses a signed time (epoch milliseconds) outside the replay window. */
export function checkFreshness(signedAtMs: number, nowMs: number, name: string): void {
  if (!Number.isFinite(signedAtMs)) throw unauthorized(`${name}: not a valid time`);
  const skewS = (nowMs - signedAtMs) / 1000;
  if (skewS > TIMESTAMP_TOLERANCE_S) throw unauthorized(`${name}: older than ${TIMESTAMP_TOLERANCE_S} s`);
  if (skewS < -TIMESTAMP_TOLERANCE_S) throw unauthorized(`${name}: more than ${TIMESTAMP_TOLERANCE_S} s in the future`);
}
