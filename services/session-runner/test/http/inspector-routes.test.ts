import { readFileSync } from 'node:fs';
import { createAuthenticator } from '@ctxflow/service-kit';
import { buildRunnerApp, createEngine, inspectorRoutes } from '@ctxflow/session-runner';
import { afterAll, describe, expect, it } from 'vitest';

const asset = (name: string) => readFileSync(new URL(`../../src/http/inspector/${name}`, import.meta.url), 'utf8');

describe('inspector routes', () => {
  const app = buildRunnerApp({
    engine: createEngine(),
    authenticate: createAuthenticator(new Map([['inspector-routes-key', 'inspector-routes-tenant']])),
    openRoutes: [inspectorRoutes],
  });
  afterAll(() => app.close());

  it('serves the page, script and style without credentials, each with its type and a CSP that allows only its own files', async () => {
    const cases = [
      ['/inspector', 'text/html; charset=utf-8', asset('index.html')],
      ['/inspector/app.js', 'text/javascript; charset=utf-8', asset('app.js')],
      ['/inspector/app.css', 'text/css; charset=utf-8', asset('app.css')],
    ] as const;
    for (const [url, type, body] of cases) {
      const response = await app.inject({ method: 'GET', url });
      expect(response.statusCode, url).toBe(200);
      expect(response.headers['content-type'], url).toBe(type);
      expect(response.body, url).toBe(body);
      expect(response.headers['content-security-policy'], url).toBe(
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
      );
      expect(response.headers['x-content-type-options'], url).toBe('nosniff');
    }
  });

  it('leaves the data it shows behind credentials', async () => {
    const refused = await app.inject({ method: 'GET', url: '/sessions' });
    expect(refused.statusCode).toBe(401);
    expect(refused.json()).toEqual({
      error: { code: 'unauthorized', message: 'missing bearer credentials', retryable: false },
    });
    const allowed = await app.inject({
      method: 'GET',
      url: '/sessions',
      headers: { authorization: 'Bearer inspector-routes-key' },
    });
    expect(allowed.statusCode).toBe(200);
    expect(allowed.json()).toEqual({ sessions: [] });
  });

  it('never writes API data as markup: the script has no innerHTML, outerHTML, insertAdjacentHTML or document.write', () => {
    const code = asset('app.js')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/^\s*\/\/.*$/gm, '');
    expect(code).toContain('textContent');
    expect(code).not.toMatch(
      /innerHTML|outerHTML|insertAdjacentHTML|document\.write|DOMParser|createContextualFragment/,
    );
  });
});
