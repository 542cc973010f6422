/** The PagerDuty verifier on the header PagerDuty documents: `v1=` signatures, one per secret while it rotates. */
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { FEEDS } from '../../../src/domain/feeds.ts';

const hex = (secret: string, body: Buffer | string) => createHmac('sha256', secret).update(body).digest('hex');

describe('PagerDuty signatures', () => {
  const body = Buffer.from('{"event":{"id":"e"}}');
  const verify = (header: string, secrets: string[]) =>
    FEEDS.pagerduty.verify({ headers: { 'x-pagerduty-signature': header }, rawBody: body }, secrets, 0);

  it('the header as PagerDuty documents it: v1 signatures joined by commas, any one verifying', () => {
    const header = `v1=${hex('old', body)},v1=${hex('new', body)}`;
    expect(verify(header, ['new'])).toBe(0);
    expect(verify(header, ['old'])).toBe(0);
    expect(verify(header, ['unrelated', 'new'])).toBe(1);
    expect(() => verify(header, ['unrelated'])).toThrow(expect.objectContaining({ code: 'unauthorized' }));
  });

  it('entries of another version are skipped; spaces around entries are allowed', () => {
    expect(verify(`v2=${'ab'.repeat(32)}, v1=${hex('s', body)}`, ['s'])).toBe(0);
  });
});
