import { hmacSha256, matchingDigest, requireHeader, secretList, unauthorized, type Verifier } from './verifier.ts';

const V1_HEX = /^v1=([0-9a-fA-F]{64})$/;
/** More signatures than this in one header are refused (PagerDuty sends one per active secret). */
const MAX_SIGNATURES = 8;

/**
 * PagerDuty v3 webhooks:
 *   X-PagerDuty-Signature: v1=<hex HMAC-SHA256(secret, raw body)>[,v1=<hex>...]
 * One signature per secret of the subscription while PagerDuty rotates it:
 * the delivery verifies when any listed `v1` signature is the digest of one
 * of the feed's secrets. Entries of another version are skipped. No
 * timestamp is signed: replays are caught by deduplicating X-Webhook-Id.
 */
export const verifyPagerduty: Verifier = (request, secrets) => {
  const header = requireHeader(request.headers, 'x-pagerduty-signature');
  const entries = header.split(',').map((entry) => entry.trim());
  if (entries.length > MAX_SIGNATURES) {
    throw unauthorized(`x-pagerduty-signature: more than ${MAX_SIGNATURES} signatures`);
  }
  const given = entries.flatMap((entry) => {
    const match = V1_HEX.exec(entry);
    return match ? [Buffer.from(match[1]!, 'hex')] : [];
  });
  if (given.length === 0) throw unauthorized('x-pagerduty-signature: expected v1=<64 hex digits>');
  const expected = secretList(secrets).map((secret) => hmacSha256(secret, request.rawBody));
  // Every listed signature is compared with every secret's digest: no early exit.
  let found = -1;
  for (const signature of given) {
    const index = matchingDigest(signature, expected);
    if (found < 0) found = index;
  }
  if (found < 0) throw unauthorized('x-pagerduty-signature: no signature matches the body');
  return found;
};
