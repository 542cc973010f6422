import { createHmac, type KeyObject } from 'node:crypto';
import { matchingDigest, requireHeader, type Secret, secretList, unauthorized, type Verifier } from './verifier.ts';

/** The fixed key both sides of the comparison are digested with, so they have one length. */
const DIGEST_KEY = 'ctxflow:gitlab-token';

function digest(value: string | Buffer): Buffer {
  return createHmac('sha256', DIGEST_KEY).update(value).digest();
}

function secretBytes(secret: Secret): string | Buffer {
  return typeof secret === 'string' ? secret : (secret as KeyObject).export();
}

/**
 * GitLab webhooks:
 *   X-Gitlab-Token: <the secret token, as configured>
 * GitLab signs nothing: the token is the secret itself. It is compared with
 * each secret in constant time (both digested first, so a token of another
 * length takes the same path). Replays are caught by deduplicating
 * Idempotency-Key.
 */
export const verifyGitlab: Verifier = (request, secrets) => {
  const token = requireHeader(request.headers, 'x-gitlab-token');
  const expected = secretList(secrets).map((secret) => digest(secretBytes(secret)));
  const found = matchingDigest(digest(token), expected);
  if (found < 0) throw unauthorized('x-gitlab-token: not the configured token');
  return found;
};
