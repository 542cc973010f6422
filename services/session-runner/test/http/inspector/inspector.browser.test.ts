/**
 * The session inspector end to end: a real server on 127.0.0.1 (the embedded
 * app with the inspector mounted), Debian's chromium driven by playwright-core.
 * The selected session is followed live on its stream.
 * Writes `test-results/inspector.png`; with `UPDATE_DOCS_SCREENSHOT=1` also
 * refreshes the copy at `docs/inspector.png` that docs/operations.md shows.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { type BrowserContext, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { entriesOf } from '../../../../step-context/test/helpers.ts';

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOT = 'test-results/inspector.png';
const DOCS_SCREENSHOT = 'docs/inspector.png';

describe('session inspector in headless Chromium', () => {
  const tenant = `inspector-${randomUUID().slice(0, 8)}`;
  const apiKey = `key-${randomUUID()}`;
  const feedSecret = `generic-${randomUUID()}`;
  let embedded: EmbeddedApp;
  let base: string;
  let profile: string;
  let browser: BrowserContext | undefined;

  beforeAll(async () => {
    embedded = await buildEmbeddedApp({
      config: { apiKeys: new Map([[apiKey, tenant]]), secrets: { generic: [{ tenant, secret: feedSecret }] } },
    });
    await embedded.app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(embedded.app.server.address() as AddressInfo).port}`;
    profile = mkdtempSync(`${tmpdir()}/ctxflow-inspector-chromium-`);
  });

  afterAll(async () => {
    await browser?.close();
    await embedded?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  /** An authenticated JSON call; asserts the status. */
  async function call(method: string, path: string, body: unknown, status: number): Promise<any> {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const json = await response.json();
    expect(response.status, JSON.stringify(json)).toBe(status);
    return json;
  }

  it('a notice posted through a signed webhook shows as kind notice, source hook, with the cursor, subscriptions and the prefix-reuse chart; a failing hook under recent skips; the step whose provider cached less marked; ticket text stays text', async () => {
    const ticket = `INSP-${randomUUID().slice(0, 6)}`;
    // Markup in ticket text: the page must show it as text and never run it.
    const summary = `Closed by Zoë <img src=x onerror="window.__inspectorPwned=1"> "fixed"`;

    const { agentId } = await call('POST', '/agents', { context: 'You answer support tickets.' }, 201);
    const { sessionId } = await call('POST', '/sessions', { agentId }, 201);
    await call('POST', `/sessions/${sessionId}/subscriptions`, { source: 'generic', ticket }, 201);
    await call('POST', `/sessions/${sessionId}/messages`, { role: 'user', content: `Is ${ticket} fixed?` }, 201);
    await call('POST', `/sessions/${sessionId}/steps`, {}, 200);

    // The signed generic webhook (README.md "HTTP API", `POST /feeds/generic`).
    const raw = JSON.stringify({ eventId: `evt-${randomUUID()}`, ticket, summary, kind: 'status', title: 'Printer' });
    const timestamp = String(Math.floor(Date.now() / 1000));
    const signature = createHmac('sha256', feedSecret).update(`${timestamp}.${raw}`).digest('hex');
    const hook = await fetch(`${base}/feeds/generic`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-ctxflow-timestamp': timestamp,
        'x-ctxflow-signature': `sha256=${signature}`,
      },
      body: raw,
    });
    expect(hook.status, await hook.text()).toBe(202);
    // The bus delivers to step-context asynchronously: wait until the update is in the session's feed stream.
    await expect.poll(async () => (await entriesOf(embedded, sessionId)).length).toBe(1);

    await call('POST', `/sessions/${sessionId}/messages`, { role: 'assistant', content: 'Checking.' }, 201);
    const stepped = await call('POST', `/sessions/${sessionId}/steps`, {}, 200);
    expect(stepped.rows).toEqual([expect.objectContaining({ kind: 'notice', source: 'hook' })]);
    const noticeText: string = stepped.rows[0].content;
    expect(noticeText).toContain(ticket);
    expect(noticeText).toContain('<img src=x');
    expect(stepped.cursor).not.toBeNull();
    const expectedCursor = JSON.stringify(stepped.cursor);
    // A warm step after it: its request starts with all of the previous one.
    await call('POST', `/sessions/${sessionId}/messages`, { role: 'user', content: 'Thanks!' }, 201);
    await call('POST', `/sessions/${sessionId}/steps`, {}, 200);
    // The provider's usage of the three steps: the third read nothing of the 2,944 tokens held.
    const { steps } = await call('GET', `/sessions/${sessionId}/inspect`, undefined, 200);
    const reported = [
      [3000, 0],
      [3100, 2944],
      [3200, 0],
    ];
    for (const [i, [prompt, cached]] of reported.entries()) {
      const usage = { prompt_tokens: prompt, prompt_tokens_details: { cached_tokens: cached } };
      await call(
        'POST',
        `/sessions/${sessionId}/steps/${steps[i].stepId}/usage`,
        { format: 'openai-chat', usage },
        200,
      );
    }

    // The page's stream connections to this session, in order: each one's request, socket and what the server wrote.
    const streams: { lastEventId: string | undefined; socket: Socket; written: string }[] = [];
    embedded.app.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      if (req.url !== `/sessions/${sessionId}/stream` || !req.headers['user-agent']?.includes('Chrome')) return;
      const stream = {
        lastEventId: req.headers['last-event-id'] as string | undefined,
        socket: req.socket,
        written: '',
      };
      streams.push(stream);
      const write = res.write.bind(res) as (chunk: unknown, ...rest: unknown[]) => boolean;
      res.write = ((chunk: unknown, ...rest: unknown[]) => {
        stream.written += String(chunk);
        return write(chunk, ...rest);
      }) as typeof res.write;
    });
    /** The event ids in what the server wrote. */
    const ids = (text: string) => [...text.matchAll(/^id: (.*)$/gm)].map((m) => m[1]);

    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      viewport: { width: 1360, height: 1000 },
    });
    const page = browser.pages()[0] ?? (await browser.newPage());
    const pageErrors: string[] = [];
    page.on('pageerror', (err) => pageErrors.push(err.message));

    await page.goto(`${base}/inspector`);
    // Without a key the API refuses, and the page says so.
    await expect.poll(() => page.locator('#sessions-status').textContent()).toContain('unauthorized');

    await page.fill('#api-key', apiKey);
    await page.click('#key-form button[type=submit]');
    const link = page.locator(`#session-list a[data-session-id="${sessionId}"]`);
    await link.waitFor();
    await link.click();

    const notice = page.locator('#log-table tr[data-kind="notice"][data-source="hook"]');
    await notice.waitFor();
    expect(await notice.count()).toBe(1);
    expect(await notice.locator('[data-testid=kind]').textContent()).toBe('notice');
    expect(await notice.locator('[data-testid=source]').textContent()).toBe('hook');
    expect(await notice.locator('pre').textContent()).toBe(noticeText);
    expect(await page.locator('#subscription-list li').allTextContents()).toEqual([`generic: ${ticket}`]);
    expect(await page.locator('#log-table img').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as { __inspectorPwned?: number }).__inspectorPwned)).toBe(undefined);

    expect(await page.locator('#cursor').textContent()).toBe(expectedCursor);

    const bars = page.locator('#reuse-chart g.reuse-step');
    expect(await bars.count()).toBe(3);
    const bytes = async (i: number, name: string) => Number(await bars.nth(i).getAttribute(`data-${name}-bytes`));
    expect(await bytes(0, 'reused')).toBe(0);
    expect(await bytes(1, 'reused')).toBe((await bytes(0, 'request')) - 1);
    expect(await bytes(2, 'reused')).toBe((await bytes(1, 'request')) - 1);
    expect(await bytes(2, 'request')).toBeGreaterThan(await bytes(1, 'request'));
    expect(await page.locator('#reuse-chart').isVisible()).toBe(true);

    // The provider's cache: the step that cached less than its unchanged prefix is marked.
    const cacheRows = page.locator('#provider-cache-table tbody tr');
    expect(await cacheRows.count()).toBe(3);
    expect(await page.locator('#provider-cache-table tr.shortfall').getAttribute('data-ordinal')).toBe('3');
    expect(await page.locator('#provider-cache-table [data-testid=cache]').allTextContents()).toEqual(['shortfall']);
    expect(await cacheRows.nth(1).locator('td').allTextContents()).toEqual([
      '2',
      steps[1].stepId,
      'openai-chat',
      '3100',
      '2944',
      '2944',
      '95%',
      'ok',
    ]);
    expect(await page.locator('#provider-cache-summary').textContent()).toBe(
      'Hit ratio 32%: 2944 of 9300 input tokens read from the cache; 1 step(s) cached less than the unchanged prefix predicted.',
    );

    // A session whose stepContext hook cannot be reached: the skip shows under recent skips.
    const failing = await call('POST', '/agents', { stepContext: { url: 'http://127.0.0.1:9/never' } }, 201);
    const skipped = await call('POST', '/sessions', { agentId: failing.agentId }, 201);
    const skippedStep = await call('POST', `/sessions/${skipped.sessionId}/steps`, {}, 200);
    expect(skippedStep.skipped).toEqual([expect.objectContaining({ reason: 'hook_error' })]);
    await page.click('#refresh-sessions');
    await page.locator(`#session-list a[data-session-id="${skipped.sessionId}"]`).click();
    const skip = page.locator(`#skips-table tr[data-reason="hook_error"]`);
    await skip.waitFor();
    expect(await skip.locator('code').textContent()).toBe(skippedStep.stepId);
    expect(await page.locator('#cursor').textContent()).toBe('none');
    await page.locator(`#session-list a[data-session-id="${sessionId}"]`).click();
    await page.locator('#log-table tr[data-kind="notice"][data-source="hook"]').waitFor();

    // Followed live: a row committed now shows without a reload (the session's stream drives the view).
    await expect.poll(() => page.locator('body').getAttribute('data-live')).toBe('live');
    const live = `Live notice ${randomUUID()}`;
    await call('POST', '/context', { sessionId, items: [{ kind: 'notice', content: live }] }, 200);
    await call('POST', `/sessions/${sessionId}/steps`, {}, 200);
    const liveRow = page.locator('#log-table tr[data-kind="notice"][data-source="app"]');
    await liveRow.waitFor();
    expect(await liveRow.locator('pre').textContent()).toBe(live);

    // The stream's connection killed server-side: the page reconnects with the last event id it read and
    // the server replays what came after it; a row committed meanwhile shows, no event lost or repeated.
    const before = streams.length;
    const killed = streams.at(-1)!;
    killed.socket.destroy();
    const missed = `Missed notice ${randomUUID()}`;
    await call('POST', '/context', { sessionId, items: [{ kind: 'notice', content: missed }] }, 200);
    await call('POST', `/sessions/${sessionId}/steps`, {}, 200);
    await page.locator('#log-table tr[data-kind="notice"][data-source="app"] pre', { hasText: missed }).waitFor();
    await expect.poll(() => page.locator('body').getAttribute('data-live')).toBe('live');
    expect(streams.length).toBe(before + 1);
    const resumed = streams.at(-1)!;
    expect(resumed.lastEventId).toBe(ids(killed.written).at(-1));
    const all = await fetch(`${base}/sessions/${sessionId}/stream?follow=false`, {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    const every = ids(await all.text());
    expect(every.length).toBeGreaterThan(ids(killed.written).length);
    expect([...ids(killed.written), ...ids(resumed.written)]).toEqual(every);

    mkdirSync('test-results', { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true });
    if (process.env.UPDATE_DOCS_SCREENSHOT === '1') copyFileSync(SCREENSHOT, DOCS_SCREENSHOT);
    expect(pageErrors).toEqual([]);
  });
});
