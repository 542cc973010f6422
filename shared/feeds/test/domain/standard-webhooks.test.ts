/**
 * The Standard Webhooks verifier against the `standardwebhooks` package (the
 * reference implementation from standard-webhooks/standard-webhooks, not this
 * verifier's code): what it signs verifies, one byte changed does not, and the
 * window, headers and rotation behave as the specification says.
 */
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { standardWebhooksKey, verifyStandardWebhooks } from '../../src/domain/verifiers/standard-webhooks.ts';
import { NOW, standardHeaders } from '../helpers.ts';

// The secret of the specification's own example (standardwebhooks.com, "Verifying webhooks").
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const OTHER = 'whsec_c2Vjb25kLXNlY3JldC1mb3Itcm90YXRpb24=';
const NOW_S = Math.floor(NOW / 1000);
const body = Buffer.from('{"test": 2432232314}');
const unauthorized = expect.objectContaining({ code: 'unauthorized', status: 401 });

const verify = (headers: Record<string, string>, secrets: string | string[], rawBody = body, now = NOW) =>
  verifyStandardWebhooks({ headers, rawBody }, secrets, now);

describe('Standard Webhooks verification', () => {
  it('a delivery signed by the standardwebhooks package verifies; its own verify agrees', () => {
    const headers = standardHeaders(body, 'msg_p5jXN8AQM9LWM0D4loKWxJek', SECRET, NOW_S);
    expect(verify(headers, SECRET)).toBe(0);
    // The package's verify reads the real clock: signed now, it accepts the same headers form.
    const live = standardHeaders(body, 'msg_live', SECRET, Math.floor(Date.now() / 1000));
    expect(new Webhook(SECRET).verify(body.toString(), live)).toEqual({ test: 2432232314 });
    expect(verify(live, SECRET, body, Date.now())).toBe(0);
  });

  it("the specification's example delivery verifies at its own time", () => {
    // standardwebhooks.com / the reference library's tests: this id, time, body and secret give this signature.
    const headers = {
      'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      'webhook-timestamp': '1614265330',
      'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    };
    expect(verify(headers, SECRET, body, 1614265330_000)).toBe(0);
  });

  it('one byte changed in the body, the id or the timestamp is refused', () => {
    const headers = standardHeaders(body, 'msg_1', SECRET, NOW_S);
    expect(() => verify(headers, SECRET, Buffer.from('{"test": 2432232315}'))).toThrow(unauthorized);
    expect(() => verify({ ...headers, 'webhook-id': 'msg_2' }, SECRET)).toThrow(unauthorized);
    expect(() => verify({ ...headers, 'webhook-timestamp': String(NOW_S - 1) }, SECRET)).toThrow(unauthorized);
    const flipped = headers['webhook-signature'].replace(/,(.)/, (_m, c: string) => `,${c === 'A' ? 'B' : 'A'}`);
    expect(() => verify({ ...headers, 'webhook-signature': flipped }, SECRET)).toThrow(unauthorized);
  });

  it('a timestamp over 300 s old or ahead is refused, even correctly signed; 300 s is accepted', () => {
    expect(() => verify(standardHeaders(body, 'm', SECRET, NOW_S - 301), SECRET)).toThrow(
      expect.objectContaining({ code: 'unauthorized', message: 'webhook-timestamp: older than 300 s' }),
    );
    expect(() => verify(standardHeaders(body, 'm', SECRET, NOW_S + 301), SECRET)).toThrow(
      expect.objectContaining({ message: 'webhook-timestamp: more than 300 s in the future' }),
    );
    expect(verify(standardHeaders(body, 'm', SECRET, NOW_S - 300), SECRET)).toBe(0);
  });

  it('each missing header is refused, naming it', () => {
    const headers = standardHeaders(body, 'msg_1', SECRET, NOW_S);
    for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const) {
      const { [name]: _, ...rest } = headers;
      expect(() => verify(rest, SECRET)).toThrow(expect.objectContaining({ message: `missing ${name} header` }));
    }
  });

  it('several v1 entries (the sender mid-rotation): any one verifies; unknown versions are skipped', () => {
    const both = standardHeaders(body, 'msg_rot', [OTHER, SECRET], NOW_S);
    expect(both['webhook-signature'].split(' ')).toHaveLength(2);
    expect(verify(both, SECRET)).toBe(0);
    expect(verify(both, OTHER)).toBe(0);
    const ours = standardHeaders(body, 'msg_rot', SECRET, NOW_S)['webhook-signature'];
    const signature = `v1a,${'A'.repeat(86)}== ${ours}`;
    expect(verify({ ...both, 'webhook-signature': signature }, SECRET)).toBe(0);
    expect(() => verify({ ...both, 'webhook-signature': `v1a,${'A'.repeat(86)}==` }, SECRET)).toThrow(
      expect.objectContaining({ message: 'webhook-signature: no v1 signature' }),
    );
  });

  it('with several secrets the index of the one that verified is returned, whichever place it has', () => {
    const headers = standardHeaders(body, 'msg_1', SECRET, NOW_S);
    expect(verify(headers, [OTHER, SECRET])).toBe(1);
    expect(verify(headers, [SECRET, OTHER])).toBe(0);
    expect(() => verify(headers, [OTHER])).toThrow(unauthorized);
    expect(() => verify(headers, [])).toThrow(unauthorized);
  });

  it('a raw secret (no whsec_) is its UTF-8 bytes, as the package signs with format "raw"', () => {
    const raw = 'rawSecretOfTheGenericFeed0';
    const headers = standardHeaders(body, 'msg_raw', raw, NOW_S);
    expect(verify(headers, raw)).toBe(0);
    // The same text read as base64 is another key.
    expect(() => verify(headers, `whsec_${raw}`)).toThrow(unauthorized);
  });

  it('malformed signatures are 401, never a crash', () => {
    const headers = standardHeaders(body, 'msg_1', SECRET, NOW_S);
    for (const signature of ['v1', 'v1,', 'v1,abc', `v1,${'!'.repeat(44)}`, 'sha256=00', ` ${'v1,x '.repeat(20)}`]) {
      expect(() => verify({ ...headers, 'webhook-signature': signature }, SECRET)).toThrow(unauthorized);
    }
    expect(() => verify({ ...headers, 'webhook-timestamp': '2024-05-01T09:31:00Z' }, SECRET)).toThrow(unauthorized);
    expect(() => verify({ ...headers, 'webhook-id': 'a b' }, SECRET)).toThrow(unauthorized);
  });

  it('a whsec_ secret whose key is not base64 is refused when made into a key, without quoting it', () => {
    expect(() => standardWebhooksKey('whsec_not*base64')).toThrow(
      'a whsec_ secret must be followed by its key in base64',
    );
    expect(() => standardWebhooksKey('whsec_')).toThrow('base64');
  });
});
