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
 * Checks one sender's signature scheme over the raw body. Returns normally when
 * the request is authentic; throws `unauthorized` otherwise. `nowMs` is epoch
 * milliseconds, for schemes that sign a timestamp.
 */
export type Verifier = (request: SignedRequest, secret: Secret, nowMs: number) => void;

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
 * Compares `sha256=<hex>` against the expected digest in constant time. The
 * format (and so the length) is checked first: `timingSafeEqual` throws on
 * unequal lengths, which must be a 401, never a 500.
 */
export function checkHexSignature(header: string, name: string, expected: Buffer): void {
  const match = SHA256_HEX.exec(header.trim());
  if (!match) throw unauthorized(`${name}: expected sha256=<64 hex digits>`);
  const given = Buffer.from(match[1]!, 'hex');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw unauthorized(`${name}: signature does not match the body`);
  }
}

/** Refuses a signed time (epoch milliseconds) outside the replay window. */
export function checkFreshness(signedAtMs: number, nowMs: number, name: string): void {
  if (!Number.isFinite(signedAtMs)) throw unauthorized(`${name}: not a valid time`);
  const skewS = (nowMs - signedAtMs) / 1000;
  if (skewS > TIMESTAMP_TOLERANCE_S) throw unauthorized(`${name}: older than ${TIMESTAMP_TOLERANCE_S} s`);
  if (skewS < -TIMESTAMP_TOLERANCE_S) throw unauthorized(`${name}: more than ${TIMESTAMP_TOLERANCE_S} s in the future`);
}
