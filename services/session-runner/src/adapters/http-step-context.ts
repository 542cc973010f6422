import { injectTraceContext, parseTraceLinks, TRACE_LINKS_HEADER } from '@ctxflow/telemetry';
import type { StepContextRequest, StepContextSource } from '../ports/step-context-source.ts';

/**
 * An HTTP stepContext hook (an agent's own, or the step-context service in the
 * stack): `POST <url>` with `{ sessionId, cursor, maxBytes }`;
 * the answer is `{ items, cursor }` (200) or nothing new (204). Any other status
 * is a hook error; the body is validated by the context pass.
 *
 * Tracing: the request carries the active trace context (`traceparent`), and
 * a `ctxflow-trace-links` answer header (the step-context service sends it)
 * is handed to `request.traced`, so the context pass links to the updates.
 */
export class HttpStepContext implements StepContextSource {
  readonly #url: string;
  readonly #token: (() => string) | undefined;

  /** `token`: the service token sent as the bearer (CTXFLOW_SERVICE_TOKEN_FILE's first line), read per call. */
  constructor(url: string, token?: () => string) {
    this.#url = url;
    this.#token = token;
  }

  async fetch(request: StepContextRequest): Promise<unknown> {
    const response = await fetch(this.#url, {
      method: 'POST',
      headers: injectTraceContext({
        'content-type': 'application/json',
        ...(this.#token ? { authorization: `Bearer ${this.#token()}` } : {}),
      }),
      body: JSON.stringify({
        sessionId: request.sessionId,
        cursor: request.cursor ?? null,
        maxBytes: request.maxBytes,
      }),
      signal: request.signal,
    });
    if (response.status === 204) return undefined;
    if (!response.ok) throw new Error(`stepContext hook answered HTTP ${response.status}`);
    const links = parseTraceLinks(response.headers.get(TRACE_LINKS_HEADER));
    if (links.length > 0) request.traced?.(links);
    const text = await response.text();
    if (text.length > request.maxBytes * 4 + 1024)
      throw new Error('stepContext hook answer is far over its byte limit');
    try {
      return JSON.parse(text);
    } catch {
      return text; // not JSON: the context pass refuses it as an invalid result
    }
  }
}
