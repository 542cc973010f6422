import {
  checkFreshness,
  hmacSha256,
  matchingDigest,
  requireHeader,
  secretList,
  unauthorized,
  type Verifier,
} from './verifier.ts';

const BASE64_SHA256 = /^[A-Za-z0-9+/]{43}=$/;

/**
 * Zendesk webhooks:
 *   X-Zendesk-Webhook-Signature-Timestamp: 2024-04-17T17:18:10Z
 *   X-Zendesk-Webhook-Signature: base64(HMAC-SHA256(secret, timestamp + raw body))
 * The timestamp is signed, so it is also held to the 300 s replay window.
 */
export const verifyZendesk: Verifier = (request, secrets, nowMs) => {
  const timestamp = requireHeader(request.headers, 'x-zendesk-webhook-signature-timestamp');
  const signature = requireHeader(request.headers, 'x-zendesk-webhook-signature').trim();
  checkFreshness(Date.parse(timestamp), nowMs, 'x-zendesk-webhook-signature-timestamp');
  if (!BASE64_SHA256.test(signature)) throw unauthorized('x-zendesk-webhook-signature: expected base64 of 32 bytes');
  const expected = secretList(secrets).map((secret) => hmacSha256(secret, timestamp, request.rawBody));
  const found = matchingDigest(Buffer.from(signature, 'base64'), expected);
  if (found < 0) throw unauthorized('x-zendesk-webhook-signature: signature does not match the body');
  return found;
};
