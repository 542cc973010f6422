/**
 * Typical refusals over the public HTTP API, each with the status the contract gives it: 401, 404,
 * 409, 400 (bodies the document refuses too, and refusals only the server can judge), malformed
 * %-escapes and oversize ids, 413, bodies that are not JSON.
 */
import { caller, signed, standardSigned, type TrafficTarget } from './contract-traffic.ts';

/** Typical refusals, each with the status the contract gives it. */
export async function refusals(target: TrafficTarget): Promise<void> {
  const call = caller(target);
  const { sessionId: s } = (await call('POST', '/sessions', {}, { status: 201 })).body;
  const { agentId } = (await call('POST', '/agents', {}, { status: 201 })).body;
  // 401: no key (the document's security says so too), a wrong key.
  await call('POST', '/sessions', {}, { status: 401, key: null, expect: 'request-violation' });
  await call('GET', `/sessions/${s}`, undefined, { status: 401, key: null, expect: 'request-violation' });
  await call('GET', '/sessions', undefined, { status: 401, key: 'not-a-key' });
  // 404: unknown session, agent, step, call, route; a feed without a secret.
  await call('GET', '/sessions/ses_unknown', undefined, { status: 404 });
  await call('POST', '/sessions/ses_unknown/steps', {}, { status: 404 });
  await call(
    'POST',
    '/context',
    { sessionId: 'ses_unknown', items: [{ kind: 'notice', content: 'x' }] },
    { status: 404 },
  );
  await call('GET', '/agents/agt_unknown', undefined, { status: 404 });
  await call('POST', '/sessions', { agentId: 'agt_unknown' }, { status: 404 });
  await call('POST', `/sessions/${s}/rewind`, { toStepId: 'stp_unknown' }, { status: 404 });
  await call('POST', `/sessions/${s}/branches`, { atStepId: 'stp_unknown' }, { status: 404 });
  await call('POST', `/sessions/${s}/tool-calls/nope/approval`, { approved: true }, { status: 404 });
  await call('POST', `/sessions/${s}/tool-calls/nope/answer`, { content: 'x' }, { status: 404 });
  await call('GET', '/nope', undefined, { status: 404, expect: 'unknown-route' });
  // Feeds without a secret here answer 404 feed_disabled, whatever they are sent.
  const event = JSON.stringify({ eventId: 'evt-1', ticket: 'T-1', summary: 'x' });
  for (const source of ['github', 'jira', 'zendesk', 'cloudevents', 'pagerduty', 'linear', 'gitlab']) {
    await call('POST', `/feeds/${source}`, undefined, {
      status: 404,
      key: null,
      raw: event,
      headers: signed('other', event),
    });
  }
  // A generic delivery with a wrong signature.
  await call('POST', '/feeds/generic', undefined, {
    status: 401,
    key: null,
    raw: event,
    headers: signed('wrong', event),
  });
  // Standard Webhooks: a stale timestamp, and a delivery the servicenow feed cannot read.
  await call('POST', '/feeds/incidentio', undefined, {
    status: 401,
    key: null,
    raw: event,
    headers: standardSigned(target.feedSecret, 'msg-stale', event, Math.floor(Date.now() / 1000) - 600),
  });
  await call('POST', '/feeds/servicenow', undefined, {
    status: 400,
    key: null,
    raw: event,
    headers: standardSigned(target.feedSecret, 'msg-bad', event),
  });
  // 409: the same idempotency key with other items.
  await call(
    'POST',
    '/context',
    { sessionId: s, items: [{ kind: 'notice', content: 'a' }], key: 'same' },
    { status: 200 },
  );
  await call(
    'POST',
    '/context',
    { sessionId: s, items: [{ kind: 'notice', content: 'b' }], key: 'same' },
    { status: 409 },
  );
  // 400: bodies the document refuses too.
  await call('POST', '/agents', { tools: [{ name: 'files.read' }] }, { status: 400, expect: 'request-violation' });
  await call('POST', '/sessions', { agentId: 7 }, { status: 400, expect: 'request-violation' });
  await call('POST', '/context', { sessionId: s }, { status: 400, expect: 'request-violation' });
  await call('POST', `/sessions/${s}/steps`, { mode: 'sideways' }, { status: 400, expect: 'request-violation' });
  await call(
    'POST',
    `/sessions/${s}/messages`,
    { role: 'robot', content: 'x' },
    { status: 400, expect: 'request-violation' },
  );
  await call('POST', `/sessions/${s}/tool-calls`, { callId: 'x' }, { status: 400, expect: 'request-violation' });
  await call('DELETE', `/agents/${agentId}?cascade=maybe`, undefined, { status: 400, expect: 'request-violation' });
  await call('GET', '/deliveries/Not_A_Source/evt-1', undefined, { status: 400, expect: 'request-violation' });
  // 400: refusals only the server can judge (a delta in a provider format, a result for no call,
  // a rewind naming no step).
  await call('POST', `/sessions/${s}/rewind`, {}, { status: 400 });
  await call('POST', `/sessions/${s}/steps`, { since: 0, format: 'anthropic' }, { status: 400 });
  await call('POST', `/sessions/${s}/messages`, { role: 'tool', callId: 'nope', content: 'x' }, { status: 400 });
  // 400: a malformed %-escape, an id over 256 characters.
  await call('GET', '/sessions/%ZZ', undefined, { status: 400 });
  await call('POST', '/sessions/%E0%A4%A/steps', {}, { status: 400 });
  await call('GET', `/sessions/${'s'.repeat(300)}`, undefined, { status: 400, expect: 'request-violation' });
  // 413: bodies over the limits (4 MiB; 2 MiB for context blocks).
  await call(
    'POST',
    `/agents/${agentId}/memories`,
    { content: 'm'.repeat(4.5 * 1024 * 1024) },
    { status: 413, expect: 'request-violation' },
  );
  await call('POST', '/sessions', { context: 'c'.repeat(2.5 * 1024 * 1024) }, { status: 413 });
  // A body that is not JSON: text is parsed as a string (400), other media types are 415.
  await call('POST', '/sessions', undefined, {
    status: 400,
    raw: 'hello',
    headers: { 'content-type': 'text/plain' },
    expect: 'request-violation',
  });
  await call('POST', '/sessions', undefined, {
    status: 415,
    raw: '<a/>',
    headers: { 'content-type': 'application/xml' },
    expect: 'request-violation',
  });
}
