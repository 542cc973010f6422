import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';

/** The page's three files, read once when this module loads (no build step). */
const asset = (name: string) => readFileSync(new URL(`./inspector/${name}`, import.meta.url), 'utf8');
const PAGE = asset('index.html');
const SCRIPT = asset('app.js');
const STYLE = asset('app.css');

/**
 * Only the page's own files run; data comes from this origin only; the page
 * cannot be framed. A ticket text that slipped into markup still could not run.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/**
 * The session inspector: `GET /inspector` (HTML), `GET /inspector/app.js`,
 * `GET /inspector/app.css`. Static, public content: the page asks the user for
 * an API key and sends it as a bearer credential with every data call it makes
 * (`GET /sessions`, `GET /sessions/:id/inspect`, `GET /sessions/:id/subscriptions`),
 * so register it without credentials (`openRoutes`) next to the session routes.
 */
export async function inspectorRoutes(app: FastifyInstance): Promise<void> {
  // Headers set per route, not in a hook: the plugin may be called inside a shared scope.
  const send = (reply: FastifyReply, type: string, body: string) =>
    reply
      .header('content-security-policy', CONTENT_SECURITY_POLICY)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', 'no-cache')
      .type(type)
      .send(body);
  const page = (operationId: string, summary: string, type: string) => ({
    schema: {
      tags: ['operations'],
      operationId,
      summary,
      produces: [type],
      response: { 200: z.string().describe(summary) },
    },
  });
  app.get('/inspector', page('getInspector', 'The inspector page', 'text/html'), async (_request, reply) =>
    send(reply, 'text/html; charset=utf-8', PAGE),
  );
  app.get(
    '/inspector/app.js',
    page('getInspectorScript', "The inspector's script", 'text/javascript'),
    async (_r, reply) => send(reply, 'text/javascript; charset=utf-8', SCRIPT),
  );
  app.get('/inspector/app.css', page('getInspectorStyle', "The inspector's style", 'text/css'), async (_r, reply) =>
    send(reply, 'text/css; charset=utf-8', STYLE),
  );
}
