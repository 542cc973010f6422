/**
 * The Linear verifier against Linear's own SDK (`@linear/sdk`, its
 * `LinearWebhookClient.verify`) as a second implementation: on every case both accept
 * or both refuse.
 */
import { createHmac } from 'node:crypto';
import { LinearWebhookClient } from '@linear/sdk/webhooks';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FEEDS } from '../../../src/domain/feeds.ts';
import { secretKey } from '../../../src/domain/verifiers/verifier.ts';
import { linearBody, NOW } from '../../helpers.ts';

const SECRET = 'lin_wh_5f2d8c0e9a7b4e1f';
const hex = (secret: string, body: Buffer | string) => createHmac('sha256', secret).update(body).digest('hex');

describe('Linear: ours and @linear/sdk agree', () => {
  beforeEach(() => {
    // The SDK reads the clock itself: both see the same "now".
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(NOW);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  const fresh = linearBody('linear-comment-create.json', NOW);
  const cases: { name: string; body: Buffer; signature: string; accepted: boolean }[] = [
    { name: 'signed now', body: fresh, signature: hex(SECRET, fresh), accepted: true },
    {
      name: 'signed 60 s ago',
      body: linearBody('linear-comment-create.json', NOW - 60_000),
      signature: hex(SECRET, linearBody('linear-comment-create.json', NOW - 60_000)),
      accepted: true,
    },
    {
      name: 'signed 60 s ahead',
      body: linearBody('linear-comment-create.json', NOW + 60_000),
      signature: hex(SECRET, linearBody('linear-comment-create.json', NOW + 60_000)),
      accepted: true,
    },
    {
      name: 'signed 60.001 s ago',
      body: linearBody('linear-comment-create.json', NOW - 60_001),
      signature: hex(SECRET, linearBody('linear-comment-create.json', NOW - 60_001)),
      accepted: false,
    },
    {
      name: 'signed 60.001 s ahead',
      body: linearBody('linear-comment-create.json', NOW + 60_001),
      signature: hex(SECRET, linearBody('linear-comment-create.json', NOW + 60_001)),
      accepted: false,
    },
    {
      name: 'one byte changed',
      body: Buffer.from(fresh.toString().replace('Indeed', 'indeed')),
      signature: hex(SECRET, fresh),
      accepted: false,
    },
    { name: 'another secret', body: fresh, signature: hex('another', fresh), accepted: false },
    { name: 'a truncated signature', body: fresh, signature: hex(SECRET, fresh).slice(0, 63), accepted: false },
    {
      name: 'no webhookTimestamp',
      body: Buffer.from('{"action":"create","type":"Comment","data":{}}'),
      signature: hex(SECRET, '{"action":"create","type":"Comment","data":{}}'),
      accepted: false,
    },
    {
      name: 'webhookTimestamp as a string',
      body: Buffer.from(`{"action":"create","webhookTimestamp":"${NOW}"}`),
      signature: hex(SECRET, `{"action":"create","webhookTimestamp":"${NOW}"}`),
      accepted: false,
    },
  ];

  for (const c of cases) {
    it(`${c.name}: ${c.accepted ? 'both accept' : 'both refuse'}`, () => {
      let sdk: boolean;
      try {
        sdk = new LinearWebhookClient(SECRET).verify(c.body, c.signature);
      } catch {
        sdk = false;
      }
      const request = { headers: { 'linear-signature': c.signature }, rawBody: c.body };
      let ours: boolean;
      try {
        ours = FEEDS.linear.verify(request, secretKey(SECRET), NOW) === 0;
      } catch (error) {
        expect(error).toMatchObject({ code: 'unauthorized', status: 401 });
        ours = false;
      }
      expect({ sdk, ours }).toEqual({ sdk: c.accepted, ours: c.accepted });
    });
  }
});
