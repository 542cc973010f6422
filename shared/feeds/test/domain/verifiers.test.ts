import { describe, expect, it } from 'vitest';
import { FEEDS } from '../../src/domain/feeds.ts';

const verifyGithub = FEEDS.github.verify;

describe('feed signature verifiers', () => {
  it("GitHub's published test vector verifies", () => {
    // docs.github.com "Validating webhook deliveries": secret, payload and expected signature.
    const headers = {
      'x-hub-signature-256': 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
    };
    expect(() =>
      verifyGithub({ headers, rawBody: Buffer.from('Hello, World!') }, "It's a Secret to Everybody", 0),
    ).not.toThrow();
  });

  it('the same vector with one byte changed is refused as unauthorized', () => {
    const headers = {
      'x-hub-signature-256': 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
    };
    expect(() =>
      verifyGithub({ headers, rawBody: Buffer.from('Hello, World?') }, "It's a Secret to Everybody", 0),
    ).toThrow(expect.objectContaining({ code: 'unauthorized', status: 401 }));
  });

  it('a signature of the wrong length is unauthorized, not a crash of timingSafeEqual', () => {
    const headers = { 'x-hub-signature-256': 'sha256=757107ea' };
    expect(() => verifyGithub({ headers, rawBody: Buffer.from('Hello, World!') }, 'secret', 0)).toThrow(
      expect.objectContaining({ code: 'unauthorized' }),
    );
  });

  it('with several secrets the verifier names the one that verified, whichever place it has', () => {
    const headers = {
      'x-hub-signature-256': 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
    };
    const request = { headers, rawBody: Buffer.from('Hello, World!') };
    const secret = "It's a Secret to Everybody";
    expect(verifyGithub(request, secret, 0)).toBe(0);
    expect(verifyGithub(request, [secret, 'other-a', 'other-b'], 0)).toBe(0);
    expect(verifyGithub(request, ['other-a', 'other-b', secret], 0)).toBe(2);
    expect(() => verifyGithub(request, ['other-a', 'other-b'], 0)).toThrow(
      expect.objectContaining({ code: 'unauthorized', status: 401 }),
    );
    expect(() => verifyGithub(request, [], 0)).toThrow(expect.objectContaining({ code: 'unauthorized' }));
  });
});
