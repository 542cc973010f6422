import { createHmac } from 'node:crypto';
import { TOPICS } from '@ctxflow/contracts';
import type { EmbeddedApp } from '@ctxflow/embedded';

/**
 * Delivers a generic-feed ticket update to the embedded app signed as a ticket system signs it
 * (HMAC-SHA256 of `<unix seconds>.<raw body>` with `secret`, docs/feeds.md); its HTTP status.
 */
export async function deliverSigned(embedded: EmbeddedApp, secret: string, update: object): Promise<number> {
  const raw = JSON.stringify(update);
  const ts = String(Math.floor(Date.now() / 1000));
  const sig = createHmac('sha256', secret).update(`${ts}.${raw}`).digest('hex');
  const answer = await embedded.app.inject({
    method: 'POST',
    url: '/feeds/generic',
    payload: raw,
    headers: { 'content-type': 'application/json', 'x-ctxflow-timestamp': ts, 'x-ctxflow-signature': `sha256=${sig}` },
  });
  return answer.statusCode;
}

/** Waits until step-context applied a first ticket update (a 202 is visible to a step from then on). */
export async function untilApplied(embedded: EmbeddedApp): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const at = await embedded.feedStreams.resumeFrom(TOPICS.ticketUpdates, 0);
    if (at !== undefined && BigInt(at) > 0n) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error('the ticket update was not applied');
}
