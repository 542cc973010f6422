/**
 * docs/feeds.md's examples run as written: each `sh` block, in bash with curl and
 * openssl, against the embedded app with the feeds' secrets in the environment, prints
 * the answer its last comment line shows; the update it published is the one the
 * section describes (ticket, kind).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const SECRETS = { pagerduty: 'doc-pd-secret', linear: 'doc-linear-secret', gitlab: 'doc-gitlab-token' };

let embedded: EmbeddedApp;
let url = '';
const published: { key: string; value: string }[] = [];

beforeAll(async () => {
  embedded = await buildEmbeddedApp({ config: { apiKeys: new Map([['doc-key', 'default']]), secrets: SECRETS } });
  const publisher = embedded.bus.publisher;
  const publish = publisher.publish.bind(publisher);
  publisher.publish = async (topic, records) => {
    for (const record of records) published.push({ key: String(record.key), value: String(record.value) });
    return publish(topic, records);
  };
  url = (await embedded.app.listen({ port: 0, host: '127.0.0.1' })).replace(/\/$/, '');
});
afterAll(async () => embedded?.close());

/** The `sh` block under each `## <Vendor>: ...` heading. */
function examples(): Record<string, string> {
  const doc = readFileSync('docs/feeds.md', 'utf8');
  const found: Record<string, string> = {};
  for (const section of doc.split(/^## /m).slice(1)) {
    const block = /```sh\n([\s\S]*?)```/.exec(section);
    if (block) found[section.slice(0, section.indexOf(':'))] = block[1]!;
  }
  return found;
}

const expected: Record<string, { source: string; ticket: string; kind: string }> = {
  PagerDuty: { source: 'pagerduty', ticket: 'PGR0VU2', kind: 'created' },
  Linear: { source: 'linear', ticket: 'WEB-43', kind: 'commented' },
  GitLab: { source: 'gitlab', ticket: 'gitlabhq/gitlab-test#23', kind: 'created' },
};

describe('docs/feeds.md', () => {
  it('has an example for each of PagerDuty, Linear and GitLab', () => {
    expect(Object.keys(examples())).toEqual(expect.arrayContaining(Object.keys(expected)));
  });

  for (const [vendor, update] of Object.entries(expected)) {
    it(`${vendor}: the example's curl prints the answer shown and publishes the ${update.kind} update of ${update.ticket}`, async () => {
      const script = examples()[vendor]!;
      const shown = script.trimEnd().split('\n').at(-1)!.replace(/^# /, '');
      const { stdout } = await run(
        'bash',
        ['-euo', 'pipefail', '-c', script.replaceAll('http://127.0.0.1:8080', url)],
        {
          env: {
            PATH: process.env.PATH ?? '',
            CTXFLOW_FEED_SECRET_PAGERDUTY: SECRETS.pagerduty,
            CTXFLOW_FEED_SECRET_LINEAR: SECRETS.linear,
            CTXFLOW_FEED_SECRET_GITLAB: SECRETS.gitlab,
          },
        },
      );
      expect(JSON.parse(stdout)).toEqual(JSON.parse(shown));
      const record = published.find((p) => JSON.parse(p.value).id === JSON.parse(shown).id);
      expect(record?.key).toBe(`${update.source}:${update.ticket}`);
      expect(JSON.parse(record!.value)).toMatchObject(update);
    });
  }
});
