/** The GitLab verifier: the token compared with each secret whatever its length. */
import { describe, expect, it } from 'vitest';
import { FEEDS } from '../../../src/domain/feeds.ts';
import { secretKey } from '../../../src/domain/verifiers/verifier.ts';

describe('GitLab token', () => {
  const verify = (token: string, secrets: string[]) =>
    FEEDS.gitlab.verify({ headers: { 'x-gitlab-token': token }, rawBody: Buffer.alloc(0) }, secrets.map(secretKey), 0);

  it('the configured token verifies and names its secret; any other, of any length, is unauthorized', () => {
    expect(verify('tok-b', ['tok-a', 'tok-b'])).toBe(1);
    for (const token of ['tok-', 'tok-bb', 'TOK-B', 'x'.repeat(10_000)]) {
      expect(() => verify(token, ['tok-a', 'tok-b']), token).toThrow(expect.objectContaining({ code: 'unauthorized' }));
    }
  });
});
