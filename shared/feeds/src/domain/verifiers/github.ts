import { checkHexSignature, hmacSha256, requireHeader, secretList, type Verifier } from './verifier.ts';

/**
 * GitHub webhooks:
 *   X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, raw body)>
 * No timestamp is signed: replays are caught by deduplicating X-GitHub-Delivery.
 */
export const verifyGithub: Verifier = (request, secrets) => {
  const signature = requireHeader(request.headers, 'x-hub-signature-256');
  const expected = secretList(secrets).map((secret) => hmacSha256(secret, request.rawBody));
  return checkHexSignature(signature, 'x-hub-signature-256', expected);
};
