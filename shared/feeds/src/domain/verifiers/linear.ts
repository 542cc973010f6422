import { CtxflowError } from '@ctxflow/contracts';
import { hmacSha256, matchingDigest, requireHeader, secretList, unauthorized, type Verifier } from './verifier.ts';

const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;
/** Linear's replay window: a `webhookTimestamp` further than this from now, either way, is refused (ms). */
export const LINEAR_TIMESTAMP_TOLERANCE_MS = 60_000;

/**
 * Linear webhooks:
 *   Linear-Signature: <hex HMAC-SHA256(secret, raw body)>
 * and the body's `webhookTimestamp` (epoch milliseconds, inside the signed
 * bytes) within 60 s of now. The `Linear-Timestamp` header is not signed and
 * is not read. The body is read for its timestamp only after the signature
 * verified it.
 */
export const verifyLinear: Verifier = (request, secrets, nowMs) => {
  const signature = requireHeader(request.headers, 'linear-signature').trim();
  if (!HEX_SHA256.test(signature)) throw unauthorized('linear-signature: expected 64 hex digits');
  const expected = secretList(secrets).map((secret) => hmacSha256(secret, request.rawBody));
  const found = matchingDigest(Buffer.from(signature, 'hex'), expected);
  if (found < 0) throw unauthorized('linear-signature: signature does not match the body');

  let body: unknown;
  try {
    body = JSON.parse(request.rawBody.toString('utf8'));
  } catch {
    throw new CtxflowError('validation_error', 'body: not valid JSON (truncated or malformed)');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new CtxflowError('validation_error', 'body: expected a JSON object');
  }
  const timestamp = (body as { webhookTimestamp?: unknown }).webhookTimestamp;
  if (typeof timestamp !== 'number' || !Number.isFinite(timestamp)) {
    throw unauthorized('webhookTimestamp: expected epoch milliseconds in the body');
  }
  const skewMs = nowMs - timestamp;
  if (skewMs > LINEAR_TIMESTAMP_TOLERANCE_MS) throw unauthorized('webhookTimestamp: older than 60 s');
  if (skewMs < -LINEAR_TIMESTAMP_TOLERANCE_MS) throw unauthorized('webhookTimestamp: more than 60 s in the future');
  return found;
};
