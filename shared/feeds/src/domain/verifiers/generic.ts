import {
  checkFreshness,
  checkHexSignature,
  hmacSha256,
  requireHeader,
  secretList,
  unauthorized,
  type Verifier,
} from './verifier.ts';

/**
 * The generic feed's scheme:
 *   x-ctxflow-timestamp: <unix seconds>
 *   x-ctxflow-signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + raw body)>
 * A timestamp more than 300 s away from now, either way, is refused.
 */
export const verifyGeneric: Verifier = (request, secrets, nowMs) => {
  const timestamp = requireHeader(request.headers, 'x-ctxflow-timestamp');
  const signature = requireHeader(request.headers, 'x-ctxflow-signature');
  if (!/^\d{1,12}$/.test(timestamp)) throw unauthorized('x-ctxflow-timestamp: expected unix seconds');
  checkFreshness(Number(timestamp) * 1000, nowMs, 'x-ctxflow-timestamp');
  const expected = secretList(secrets).map((secret) => hmacSha256(secret, timestamp, '.', request.rawBody));
  return checkHexSignature(signature, 'x-ctxflow-signature', expected);
};
