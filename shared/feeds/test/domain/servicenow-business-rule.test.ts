/**
 * The Script Include and Business Rule of docs/servicenow.md, verbatim from
 * the page, run in Node against stand-ins of the ServiceNow APIs they call:
 * what they would send to `/feeds/servicenow` verifies, as the record it is;
 * one byte changed does not. `GlideCertificateEncryption.generateMac` is
 * stood in for as ServiceNow documents it (the key in base64, the MAC of the
 * data in base64); the signature is also checked against the
 * `standardwebhooks` package's own.
 */
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { runInNewContext } from 'node:vm';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { feedApp, NOW, SECRETS } from '../helpers.ts';

const page = readFileSync(new URL('../../../../docs/servicenow.md', import.meta.url), 'utf8');
const scripts = [...page.matchAll(/^```javascript\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);

interface Sent {
  endpoint?: string;
  method?: string;
  headers: Record<string, string>;
  body?: string;
  sent: number;
}

/** A GlideRecord of an incident: values, display values, and the journal fields this update added to. */
function incident(values: Record<string, string>, display: Record<string, string>, journal: Record<string, string>) {
  const element = (name: string) => ({
    changes: () => name in journal,
    getJournalEntry: (n: number) => (n === 1 ? (journal[name] ?? '') : ''),
  });
  return {
    getValue: (name: string) => values[name] ?? null,
    getDisplayValue: (name: string) => display[name] ?? values[name] ?? '',
    getUniqueValue: () => values.sys_id,
    comments: element('comments'),
    work_notes: element('work_notes'),
  };
}

/** Runs the page's two scripts for `current`; returns what RESTMessageV2 was given. */
function runRule(current: unknown, properties: Record<string, string>): Sent {
  const sent: Sent = { headers: {}, sent: 0 };
  const context = {
    JSON,
    Math,
    String,
    // Prototype's Class.create, as ServiceNow provides it.
    Class: {
      create: () =>
        function (this: { initialize(...args: unknown[]): void }, ...args: unknown[]) {
          this.initialize(...args);
        },
    },
    gs: { getProperty: (name: string) => properties[name] },
    GlideDateTime: class {
      getNumericValue() {
        return NOW;
      }
    },
    GlideCertificateEncryption: class {
      generateMac(key: string, algorithm: string, data: string) {
        expect(algorithm).toBe('HmacSHA256');
        return createHmac('sha256', Buffer.from(key, 'base64')).update(data, 'utf8').digest('base64');
      }
    },
    sn_ws: {
      RESTMessageV2: class {
        setEndpoint(url: string) {
          sent.endpoint = url;
        }
        setHttpMethod(method: string) {
          sent.method = method;
        }
        setRequestHeader(name: string, value: string) {
          sent.headers[name.toLowerCase()] = value;
        }
        setRequestBody(body: string) {
          sent.body = body;
        }
        executeAsync() {
          sent.sent += 1;
        }
      },
    },
    current,
    previous: null,
  };
  runInNewContext(`${scripts[0]}\n;this.CtxflowWebhook = CtxflowWebhook;`, context);
  runInNewContext(scripts[1]!, context);
  return sent;
}

const values = {
  sys_id: '9d385017c611228701d22104cc95c371',
  number: 'INC0000001',
  short_description: "Can't read email — «urgent»",
  state: '2',
  priority: '1',
  sys_updated_on: '2024-05-01 09:30:40',
  sys_updated_by: 'beth.anglin',
  sys_mod_count: '8',
  sys_class_name: 'incident',
};
const display = { state: 'In Progress', priority: '1 - Critical' };
const COMMENT = '2024-05-01 09:30:40 - Beth Anglin (Additional comments)\nRestore finished; please try again.';

describe('the ServiceNow Business Rule of docs/servicenow.md', () => {
  it('the page holds the Script Include and the Business Rule', () => {
    expect(scripts).toHaveLength(2);
    expect(scripts[0]).toContain('var CtxflowWebhook = Class.create();');
    expect(scripts[1]).toContain('new CtxflowWebhook().send(current);');
  });

  it('what it sends is a Standard Webhooks delivery the feed verifies and takes as the record', async () => {
    const sent = runRule(incident(values, display, { comments: COMMENT }), {
      'ctxflow.webhook.url': 'https://ctxflow.example.com/feeds/servicenow',
      'ctxflow.webhook.secret': SECRETS.servicenow,
    });
    expect(sent).toMatchObject({ endpoint: 'https://ctxflow.example.com/feeds/servicenow', method: 'post', sent: 1 });
    const id = `${values.sys_id}.8`;
    expect(sent.headers).toMatchObject({
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(NOW / 1000)),
    });
    // The reference package signs the same id, time and body alike.
    const reference = new Webhook(SECRETS.servicenow).sign(id, new Date(NOW), sent.body!);
    expect(sent.headers['webhook-signature']).toBe(reference);

    const { app, publisher } = await feedApp();
    const res = await app.inject({
      method: 'POST',
      url: '/feeds/servicenow',
      headers: sent.headers,
      payload: sent.body,
    });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ accepted: true, id: `servicenow:${id}` });
    expect(JSON.parse(publisher.published[0]!.record.value)).toMatchObject({
      ticket: 'INC0000001',
      scope: 'incident',
      kind: 'commented',
      version: 8,
      title: "Can't read email — «urgent»",
      summary: `INC0000001 updated: Can't read email — «urgent» (state In Progress, priority 1 - Critical)\nComment: ${COMMENT}`,
      changes: [{ field: 'comments', from: null, to: COMMENT }],
      occurredAt: '2024-05-01T09:30:40Z',
    });

    // One byte changed in what it sent: refused, nothing more published.
    const changed = sent.body!.replace('"8"', '"9"');
    const refused = await app.inject({
      method: 'POST',
      url: '/feeds/servicenow',
      headers: sent.headers,
      payload: changed,
    });
    expect(refused.statusCode).toBe(401);
    expect(publisher.published).toHaveLength(1);
    await app.close();
  });
});
