/**
 * The Grafana dashboard (deploy/kubernetes/dashboards/ctxflow.json) and the alert rules
 * (deploy/kubernetes/monitoring.yaml) against what the services export: every query is parsed
 * with Prometheus's own PromQL grammar, and every metric and label it names must be in the
 * `/metrics` scrape of the embedded process (all three services' routes, consumers and
 * telemetry in one) after traffic that makes each series appear. Broken copies are refused.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { TOPICS } from '@ctxflow/contracts';
import { buildEmbeddedApp, type EmbeddedApp } from '@ctxflow/embedded';
import { createFeedTelemetry } from '@ctxflow/feeds';
import { Secret } from '@ctxflow/service-kit';
import { createContextTelemetry } from '@ctxflow/session-runner';
import { createConsumerTelemetry } from '@ctxflow/step-context';
import {
  METRIC_CONSUMER_LAG,
  METRIC_CONTEXT_PASS_DURATION,
  METRIC_CONTEXT_ROWS,
  METRIC_CONTEXT_SKIPPED,
  METRIC_DEAD_LETTERS,
  METRIC_FEED_INGESTED,
  METRIC_FEED_REFUSED,
  METRIC_OFFSET_MISMATCHES,
  METRIC_PREFIX_REUSE_RATIO,
  METRIC_PREFIX_REUSED_BYTES,
  METRIC_PROVIDER_CACHED_TOKENS,
  METRIC_PROVIDER_INPUT_TOKENS,
  METRIC_RECEIPT_DEAD_LETTERS,
  METRIC_RECEIPT_WEBHOOK_CALLS,
  type RunningTelemetry,
  startTelemetry,
} from '@ctxflow/telemetry';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { refusals } from '../support/contract-refusals.ts';
import { caller, contractFlows, walkthrough } from '../support/contract-traffic.ts';
import { ROOT } from './kube-schemas.ts';
import { exportedMetrics, interpolateGrafana, promqlProblems, readPromql } from './promql.ts';

type Doc = Record<string, any>;

const KUBE_DIR = join(ROOT, 'deploy', 'kubernetes');
const API_KEY = 'monitoring-key';
const TENANT = 'tenant-monitoring';
// The walkthrough's generic feed secret (docs/walkthrough.md).
const FEED_SECRET = 'demo-secret';

function readDashboard(): Doc {
  return JSON.parse(readFileSync(join(KUBE_DIR, 'dashboards', 'ctxflow.json'), 'utf8')) as Doc;
}

function readRule(): Doc {
  const docs = parseAllDocuments(readFileSync(join(KUBE_DIR, 'monitoring.yaml'), 'utf8')).map((d) => d.toJS() as Doc);
  return docs.find((d) => d.kind === 'PrometheusRule')!;
}

/** Every dashboard query, Grafana variables replaced as Grafana does before sending it. */
function dashboardQueries(dashboard: Doc): { where: string; expr: string }[] {
  return dashboard.panels.flatMap((panel: Doc) =>
    panel.targets.map((target: Doc) => ({
      where: `panel "${panel.title}" ${target.refId}`,
      expr: interpolateGrafana(target.expr),
    })),
  );
}

function ruleQueries(rule: Doc): { where: string; expr: string }[] {
  return rule.spec.groups.flatMap((group: Doc) =>
    group.rules.map((r: Doc) => ({ where: `alert ${r.alert ?? r.record}`, expr: r.expr })),
  );
}

/** The Prometheus name of an OpenTelemetry counter (`.` to `_`, `_total`). */
const counter = (name: string) => `${name.replaceAll('.', '_')}_total`;
const gauge = (name: string) => name.replaceAll('.', '_');
const histogram = (name: string) => ['_bucket', '_sum', '_count'].map((s) => `${name.replaceAll('.', '_')}${s}`);

let telemetry: RunningTelemetry;
let embedded: EmbeddedApp;
/** A receipt webhook receiver that refuses every call (410): each receipt is dead-lettered. */
let refusing: Server | undefined;
let exposition = '';
let healthzBefore = 0;

/** The count of answered `GET /healthz` requests in an exposition. */
function healthzCount(text: string): number {
  const match =
    /^http_server_request_duration_count\{http_request_method="GET",http_response_status_code="200",http_route="\/healthz",otel_scope_name="ctxflow"\} (\d+)$/m.exec(
      text,
    );
  return Number(match?.[1] ?? 0);
}

beforeAll(async () => {
  // As services/embedded/src/main.ts builds it: the global providers, the services' own telemetry objects.
  telemetry = startTelemetry({ serviceName: 'ctxflow' });
  const consumerTelemetry = createConsumerTelemetry();
  refusing = createServer((_req, res) => res.writeHead(410).end());
  await new Promise<void>((resolve) => refusing!.listen(0, '127.0.0.1', resolve));
  embedded = await buildEmbeddedApp({
    config: {
      apiKeys: new Map([[API_KEY, TENANT]]),
      receiptWebhook: {
        url: `http://127.0.0.1:${(refusing.address() as AddressInfo).port}/`,
        secret: new Secret('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'),
        maxAttempts: 1,
        timeoutMs: 5_000,
      },
      // The feeds the contract traffic signs for.
      secrets: Object.fromEntries(
        ['generic', 'incidentio', 'servicenow'].map((source) => [source, [{ tenant: TENANT, secret: FEED_SECRET }]]),
      ),
    },
    telemetry: createContextTelemetry(),
    feedTelemetry: createFeedTelemetry(),
    consumerTelemetry,
    metricsText: () => telemetry.metricsText(),
  });
  const url = await embedded.app.listen({ port: 0, host: '127.0.0.1' });
  const target = { url, apiKey: API_KEY, feedSecret: FEED_SECRET };
  // Steps, rows, webhooks accepted and refused, 2xx and 4xx answers.
  await walkthrough(target);
  await contractFlows(target);
  await refusals(target);
  // A skip: a memory recall too large for the step (R34).
  const call = caller(target);
  const { agentId } = (await call('POST', '/agents', { memory: { autoInject: true } }, { status: 201 })).body;
  for (let i = 0; i < 3; i++) {
    await call('POST', `/agents/${agentId}/memories`, { content: `${i}: ${'m'.repeat(16_000)}` }, { status: 201 });
  }
  const { sessionId } = (await call('POST', '/sessions', { agentId }, { status: 201 })).body;
  await call('POST', `/sessions/${sessionId}/messages`, { role: 'user', content: 'Hi' }, { status: 201 });
  const step = (await call('POST', `/sessions/${sessionId}/steps`, {}, { status: 200 })).body;
  expect(step.skipped).toEqual([{ reason: 'memory_too_large', message: expect.any(String) }]);
  // A dead letter: a record on the ticket-updates topic that is not JSON.
  await embedded.bus.publisher.publish(TOPICS.ticketUpdates, [{ key: 'poison', value: 'not json' }]);
  await vi.waitFor(async () => expect(await telemetry.metricsText()).toContain('ctxflow_dlq_reason="not_json"'), {
    timeout: 10_000,
  });
  // Offset mismatches happen only on Kafka (a stored offset that does not fit the partition's
  // log); the in-memory bus has none: recorded through step-context's own telemetry object.
  consumerTelemetry.offsetMismatch({
    group: 'ctxflow-step-context',
    topic: TOPICS.ticketUpdates,
    partition: 0,
    mismatch: 'beyond_end',
    reset: 'earliest',
  });
  // A receipt the webhook refuses: dead-lettered, the gauge reads the queue's count.
  const queue = embedded.receipts.queue!;
  await queue.enqueue([
    {
      tenant: TENANT,
      source: 'generic',
      eventId: 'evt_monitoring',
      sessionId,
      stepId: step.stepId,
      rowId: `${step.stepId}.0`,
      at: new Date().toISOString(),
    },
  ]);
  await vi.waitFor(
    async () => {
      const waiting = await queue.deadLetterCount();
      expect(waiting).toBeGreaterThan(0);
      expect(await telemetry.metricsText()).toMatch(
        new RegExp(`^ctxflow_receipt_webhook_dead_letters\\{[^}]*\\} ${waiting}$`, 'm'),
      );
    },
    { timeout: 10_000 },
  );
  // Three probes more, counted exactly below.
  healthzBefore = healthzCount(await telemetry.metricsText());
  for (let i = 0; i < 3; i++) await call('GET', '/healthz', undefined, { status: 200, key: null });
  const scrape = await fetch(`${url}/metrics`);
  expect(scrape.status).toBe(200);
  exposition = await scrape.text();
}, 120_000);

afterAll(async () => {
  await embedded?.close();
  await telemetry?.shutdown();
  await new Promise((resolve) => refusing?.close(resolve));
});

describe('the scrape: what the services export on /metrics', () => {
  it('every ctxflow instrument, under its Prometheus name, and the HTTP server histogram', () => {
    const exported = exportedMetrics(exposition);
    expect([...exported.keys()].filter((n) => n !== 'target_info').sort()).toEqual(
      [
        counter(METRIC_CONTEXT_SKIPPED),
        counter(METRIC_CONTEXT_ROWS),
        counter(METRIC_FEED_INGESTED),
        counter(METRIC_FEED_REFUSED),
        counter(METRIC_DEAD_LETTERS),
        counter(METRIC_OFFSET_MISMATCHES),
        counter(METRIC_PROVIDER_INPUT_TOKENS),
        counter(METRIC_PROVIDER_CACHED_TOKENS),
        counter(METRIC_RECEIPT_WEBHOOK_CALLS),
        gauge(METRIC_CONSUMER_LAG),
        gauge(METRIC_RECEIPT_DEAD_LETTERS),
        ...histogram(METRIC_CONTEXT_PASS_DURATION),
        ...histogram(METRIC_PREFIX_REUSED_BYTES),
        ...histogram(METRIC_PREFIX_REUSE_RATIO),
        ...histogram('http.server.request.duration'),
      ].sort(),
    );
    expect([...exported.get('ctxflow_feed_refused_total')!].sort()).toEqual(
      ['ctxflow_feed_reason', 'ctxflow_feed_source', 'otel_scope_name'].sort(),
    );
    expect([...exported.get('http_server_request_duration_count')!].sort()).toEqual(
      ['http_request_method', 'http_response_status_code', 'http_route', 'otel_scope_name'].sort(),
    );
    // The three probes before the scrape, counted under their route template.
    expect(healthzCount(exposition)).toBe(healthzBefore + 3);
    expect(exposition).toMatch(/ctxflow_context_skipped_total\{ctxflow_skip_reason="memory_too_large",[^}]*\} 1\n/);
  });
});

describe('alert rules (PrometheusRule ctxflow)', () => {
  it('every expression is PromQL and names only exported metrics and their labels', () => {
    const exported = exportedMetrics(exposition);
    const queries = ruleQueries(readRule());
    expect(queries.flatMap(({ where, expr }) => promqlProblems(expr, exported, where))).toEqual([]);
    expect(queries.map((q) => q.where)).toEqual([
      'alert CtxflowConsumerLagHigh',
      'alert CtxflowDeadLetters',
      'alert CtxflowReceiptDeadLetters',
      'alert CtxflowOffsetMismatch',
      'alert CtxflowContextSkips',
      'alert CtxflowHttpErrors',
      'alert CtxflowPrefixReuseFalling',
    ]);
    expect([...new Set(queries.flatMap(({ expr }) => readPromql(expr).metrics))].sort()).toEqual(
      [
        'ctxflow_consumer_dead_letters_total',
        'ctxflow_consumer_lag',
        'ctxflow_consumer_offset_mismatches_total',
        'ctxflow_context_pass_duration_count',
        'ctxflow_context_skipped_total',
        'ctxflow_prompt_prefix_reuse_ratio_count',
        'ctxflow_prompt_prefix_reuse_ratio_sum',
        'ctxflow_receipt_webhook_dead_letters',
        'http_server_request_duration_count',
      ].sort(),
    );
  });

  it('every alert has a severity, a summary and a description pointing at the runbook', () => {
    for (const rule of readRule().spec.groups.flatMap((g: Doc) => g.rules)) {
      expect(['warning', 'critical'], rule.alert).toContain(rule.labels.severity);
      expect(rule.annotations.summary, rule.alert).toEqual(expect.any(String));
      expect(rule.annotations.description, rule.alert).toContain('docs/operations.md#dashboard-alerts-and-policies');
    }
  });
});

describe('Grafana dashboard (dashboards/ctxflow.json)', () => {
  it('every panel query is PromQL and names only exported metrics and their labels', () => {
    const exported = exportedMetrics(exposition);
    const dashboard = readDashboard();
    const queries = dashboardQueries(dashboard);
    expect(queries.flatMap(({ where, expr }) => promqlProblems(expr, exported, where))).toEqual([]);
    // Every ctxflow family has a panel.
    const named = new Set(queries.flatMap(({ expr }) => readPromql(expr).metrics));
    for (const family of [...exported.keys()].filter((n) => n.startsWith('ctxflow_') && !n.endsWith('_bucket'))) {
      const base = family.replace(/_(sum|count)$/, '');
      expect(
        [...named].some((n) => n === family || n.replace(/_(sum|count|bucket)$/, '') === base),
        family,
      ).toBe(true);
    }
  });

  it('panels on the datasource variable, unique ids and refIds, a namespace filter on every query', () => {
    const dashboard = readDashboard();
    expect(dashboard.uid).toBe('ctxflow');
    expect(dashboard.templating.list.map((v: Doc) => [v.name, v.type])).toEqual([
      ['datasource', 'datasource'],
      ['namespace', 'textbox'],
    ]);
    const ids = dashboard.panels.map((p: Doc) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const panel of dashboard.panels) {
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a template literal.
      expect(panel.datasource, panel.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
      const refIds = panel.targets.map((t: Doc) => t.refId);
      expect(new Set(refIds).size, panel.title).toBe(refIds.length);
      for (const target of panel.targets) {
        const { metrics } = readPromql(interpolateGrafana(target.expr));
        // One `namespace="$namespace"` matcher per selector.
        expect(target.expr.split('namespace="$namespace"').length - 1, panel.title).toBe(metrics.length);
      }
    }
  });
});

describe('refuses broken copies', () => {
  it('Prometheus grammar: an unclosed call and a dangling operator', () => {
    expect(readPromql('sum(rate(ctxflow_context_rows_total[5m]) by').errors).toEqual(['syntax error at 41: "by"']);
    expect(readPromql('ctxflow_consumer_lag >').errors.length).toBeGreaterThan(0);
    expect(readPromql('{__name__="ctxflow_consumer_lag"}').errors).toEqual([
      'selector without a metric name at 0: "{__name__="ctxflow_consumer_lag"}"',
      'a metric named by a __name__ matcher',
    ]);
  });

  it('an alert rule with a misspelled metric, a label no metric has, and a bad expression', () => {
    const exported = exportedMetrics(exposition);
    const rule = structuredClone(readRule());
    const [lag, deadLetters, , mismatch] = rule.spec.groups[0].rules;
    lag.expr = lag.expr.replace('ctxflow_consumer_lag', 'ctxflow_consumer_lags');
    deadLetters.expr = deadLetters.expr.replace('ctxflow_dlq_reason', 'ctxflow_dlq_cause');
    mismatch.expr = 'sum(increase(ctxflow_consumer_offset_mismatches_total[15m]) > ';
    expect(ruleQueries(rule).flatMap(({ where, expr }) => promqlProblems(expr, exported, where))).toEqual([
      'alert CtxflowConsumerLagHigh: metric "ctxflow_consumer_lags" is not exported',
      // With its metric unknown, the labels it groups by are unknown too.
      'alert CtxflowConsumerLagHigh: label "ctxflow_consumer_group" is on none of its metrics',
      'alert CtxflowConsumerLagHigh: label "ctxflow_topic" is on none of its metrics',
      'alert CtxflowConsumerLagHigh: label "ctxflow_partition" is on none of its metrics',
      'alert CtxflowDeadLetters: label "ctxflow_dlq_cause" is on none of its metrics',
      'alert CtxflowOffsetMismatch: syntax error at 62: the expression ends too early',
    ]);
  });

  it('a dashboard panel with a metric the services do not export', () => {
    const exported = exportedMetrics(exposition);
    const dashboard = structuredClone(readDashboard());
    dashboard.panels[0].targets[0].expr = 'sum(rate(ctxflow_steps_total{namespace="$namespace"}[$__rate_interval]))';
    expect(dashboardQueries(dashboard).flatMap(({ where, expr }) => promqlProblems(expr, exported, where))).toEqual([
      'panel "Steps per second" A: metric "ctxflow_steps_total" is not exported',
    ]);
  });
});
