import { checkHexSignature, hmacSha256, requireHeader, secretList, type Verifier } from './verifier.ts';

/**
 * Jira Cloud admin webhooks registered with a secret:
 *   X-Hub-Signature: sha256=<hex HMAC-SHA256(secret, raw body)>
 * No timestamp is signed: replays are caught by deduplicating the delivery id.
 */
export const verifyJira: Verifier = (request, secrets) => {
  const signature = requireHeader(request.headers, 'x-hub-signature');
  const expected = secretList(secrets).map((secret) => hmacSha256(secret, request.rawBody));
  return checkHexSignature(signature, 'x-hub-signature', expected);
};
