import { createSecretKey, type KeyObject } from 'node:crypto';
import {
  checkFreshness,
  type Headers,
  hmacSha256,
  matchingDigest,
  requireHeader,
  type Secret,
  secretList,
  unauthorized,
  type Verifier,
} from './verifier.ts';

/** The header whose presence makes a generic or CloudEvents delivery a Standard Webhooks one. */
export const STANDARD_WEBHOOKS_SIGNATURE = 'webhook-signature';
/** The prefix of a Standard Webhooks secret: the rest is the key in base64. */
export const STANDARD_WEBHOOKS_SECRET_PREFIX = 'whsec_';

/** Most `v1,` entries read from one `webhook-signature` header (rotation needs two). */
const MAX_SIGNATURES = 8;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const BASE64_SHA256 = /^[A-Za-z0-9+/]{43}=$/;
const MESSAGE_ID = /^[\x21-\x7e]{1,256}$/;

/**
 * The HMAC key of a configured secret under Standard Webhooks: `whsec_<base64>`
 * is the decoded bytes (as the senders' dashboards show it); any other string is
 * taken raw, its UTF-8 bytes (the reference library's `format: "raw"`). Throws
 * on a `whsec_` secret whose rest is not base64 or is empty, without quoting it.
 */
export function standardWebhooksKey(secret: string): KeyObject {
  if (!secret.startsWith(STANDARD_WEBHOOKS_SECRET_PREFIX)) return createSecretKey(secret, 'utf8');
  const encoded = secret.slice(STANDARD_WEBHOOKS_SECRET_PREFIX.length);
  if (encoded.length === 0 || encoded.length % 4 === 1 || !BASE64.test(encoded)) {
    throw new Error('a whsec_ secret must be followed by its key in base64');
  }
  return createSecretKey(Buffer.from(encoded, 'base64'));
}

/** Whether a request carries a Standard Webhooks signature (then it is verified that way). */
export function hasStandardWebhooksSignature(headers: Headers): boolean {
  return headers[STANDARD_WEBHOOKS_SIGNATURE] !== undefined;
}

/** The verified delivery id of a Standard Webhooks request (`webhook-id`); call after verifying. */
export function standardWebhooksId(headers: Headers): string {
  return requireHeader(headers, 'webhook-id');
}

/**
 * Standard Webhooks (standardwebhooks.com, the scheme of Svix-based senders):
 *   webhook-id: <message id>
 *   webhook-timestamp: <unix seconds>
 *   webhook-signature: v1,<base64 HMAC-SHA256(key, id + "." + timestamp + "." + raw body)> [v1,<base64> ...]
 * Any listed `v1` signature verifies (the sender signs with each key while one
 * rotates); other versions (`v1a`, asymmetric) are skipped. The timestamp is
 * held to the 300 s window either way. A plain string secret is turned into its
 * key by `standardWebhooksKey`; the routes pass keys made once.
 *
 * The `standardwebhooks` package is not the verifier: it reads the clock
 * itself (no `nowMs`), takes one secret per instance and so cannot tell which
 * of several verified in constant time, and verifies the body decoded to a
 * string rather than its bytes. Its `sign` is the tests' second implementation.
 */
export const verifyStandardWebhooks: Verifier = (request, secrets, nowMs) => {
  const id = requireHeader(request.headers, 'webhook-id');
  const timestamp = requireHeader(request.headers, 'webhook-timestamp');
  const header = requireHeader(request.headers, STANDARD_WEBHOOKS_SIGNATURE);
  if (!MESSAGE_ID.test(id)) throw unauthorized('webhook-id: expected 1 to 256 printable characters');
  if (!/^\d{1,12}$/.test(timestamp)) throw unauthorized('webhook-timestamp: expected unix seconds');
  checkFreshness(Number(timestamp) * 1000, nowMs, 'webhook-timestamp');
  const entries = header.trim().split(/\s+/);
  if (entries.length > MAX_SIGNATURES) {
    throw unauthorized(`webhook-signature: more than ${MAX_SIGNATURES} signatures`);
  }
  const given: Buffer[] = [];
  for (const entry of entries) {
    const comma = entry.indexOf(',');
    if (comma < 0) throw unauthorized('webhook-signature: expected v1,<base64> entries separated by spaces');
    if (entry.slice(0, comma) !== 'v1') continue;
    const signature = entry.slice(comma + 1);
    if (!BASE64_SHA256.test(signature)) {
      throw unauthorized('webhook-signature: a v1 signature is not base64 of 32 bytes');
    }
    given.push(Buffer.from(signature, 'base64'));
  }
  if (given.length === 0) throw unauthorized('webhook-signature: no v1 signature');
  const keys = secretList(secrets).map((secret: Secret) =>
    typeof secret === 'string' ? standardWebhooksKey(secret) : secret,
  );
  const expected = keys.map((key) => hmacSha256(key, id, '.', timestamp, '.', request.rawBody));
  // Every given signature against every key, each comparison in constant time, no early exit.
  let found = -1;
  for (const signature of given) {
    const index = matchingDigest(signature, expected);
    if (index >= 0 && found < 0) found = index;
  }
  if (found < 0) throw unauthorized('webhook-signature: no signature matches the body');
  return found;
};
