import { noopContextTelemetry } from '@ctxflow/session-runner';
import {
  ATTR_FEED_REASON,
  ATTR_FEED_SOURCE,
  ATTR_ROW_KIND,
  ATTR_ROW_SOURCE,
  ATTR_SKIP_REASON,
  ATTR_STEP_MODE,
  EVENT_CONTEXT_SKIPPED,
  METRIC_CONSUMER_LAG,
  METRIC_CONTEXT_PASS_DURATION,
  METRIC_CONTEXT_ROWS,
  METRIC_CONTEXT_SKIPPED,
  METRIC_FEED_INGESTED,
  METRIC_FEED_REFUSED,
  METRIC_PREFIX_REUSE_RATIO,
  METRIC_PREFIX_REUSED_BYTES,
  SKIP_REASONS,
  SPAN_CONTEXT_PASS,
  SPAN_STORE_COMMIT,
} from '@ctxflow/telemetry';
import { InMemoryLogRecordExporter, LoggerProvider, SimpleLogRecordProcessor } from '@opentelemetry/sdk-logs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestTelemetry, type TestTelemetry } from '../../../test/support/telemetry.ts';

let t: TestTelemetry;
beforeEach(() => {
  t = createTestTelemetry();
});
afterEach(async () => {
  await t.shutdown();
});

describe('contextSkipped', () => {
  it('R26: emits exactly one core.context.skipped log record, WARN, with the exact attributes', async () => {
    t.contextTelemetry.contextSkipped({
      sessionId: 'ses-skip-1',
      stepId: 'step-7',
      reason: 'hook_timeout',
      message: 'stepContext did not answer within 5000 ms',
    });

    const records = await t.logRecords();
    expect(records).toEqual([
      {
        eventName: 'core.context.skipped',
        severityNumber: 13,
        severityText: 'WARN',
        body: 'stepContext did not answer within 5000 ms',
        attributes: {
          'ctxflow.session_id': 'ses-skip-1',
          'ctxflow.step_id': 'step-7',
          'ctxflow.skip.reason': 'hook_timeout',
          'ctxflow.skip.message': 'stepContext did not answer within 5000 ms',
        },
        traceId: undefined,
        spanId: undefined,
      },
    ]);
    expect(EVENT_CONTEXT_SKIPPED).toBe('core.context.skipped');
  });

  it('R26/R34: counts ctxflow.context.skipped by reason', async () => {
    const base = { sessionId: 'ses-skip-2', stepId: 's1', message: 'x' };
    t.contextTelemetry.contextSkipped({ ...base, reason: 'hook_timeout' });
    t.contextTelemetry.contextSkipped({ ...base, reason: 'hook_timeout' });
    t.contextTelemetry.contextSkipped({ ...base, reason: 'hook_error' });
    t.contextTelemetry.contextSkipped({ ...base, reason: 'memory_too_large' });

    expect(await t.metric(METRIC_CONTEXT_SKIPPED, { [ATTR_SKIP_REASON]: 'hook_timeout' })).toBe(2);
    expect(await t.metric(METRIC_CONTEXT_SKIPPED, { [ATTR_SKIP_REASON]: 'hook_error' })).toBe(1);
    expect(await t.metric(METRIC_CONTEXT_SKIPPED, { [ATTR_SKIP_REASON]: 'memory_too_large' })).toBe(1);
    expect(await t.metric(METRIC_CONTEXT_SKIPPED, { [ATTR_SKIP_REASON]: 'hook_invalid' })).toBe(0);
    expect(await t.metric(METRIC_CONTEXT_SKIPPED)).toBe(4);
    expect((await t.logRecords()).map((r) => r.attributes[ATTR_SKIP_REASON])).toEqual([
      'hook_timeout',
      'hook_timeout',
      'hook_error',
      'memory_too_large',
    ]);
  });

  it('names the four skip reasons', () => {
    expect(SKIP_REASONS).toEqual(['hook_error', 'hook_timeout', 'hook_invalid', 'memory_too_large']);
  });
});

describe('stepCommitted', () => {
  it('R2/R5: counts committed rows by kind and source, and records duration and prefix reuse by mode', async () => {
    t.contextTelemetry.stepCommitted({
      sessionId: 'ses-commit-1',
      stepId: 's1',
      mode: 'first',
      rows: [
        { kind: 'notice', source: 'hook' },
        { kind: 'notice', source: 'hook' },
        { kind: 'tools', source: 'tool' },
        { kind: 'memory', source: 'memory' },
      ],
      durationMs: 40,
      requestBytes: 2000,
      prefixReusedBytes: 1500,
    });
    t.contextTelemetry.stepCommitted({
      sessionId: 'ses-commit-1',
      stepId: 's2',
      mode: 'retry',
      rows: [{ kind: 'notice', source: 'hook' }],
      durationMs: 10,
      requestBytes: 3000,
      prefixReusedBytes: 3000,
    });

    const rows = (kind: string, source: string) =>
      t.metric(METRIC_CONTEXT_ROWS, { [ATTR_ROW_KIND]: kind, [ATTR_ROW_SOURCE]: source });
    expect(await rows('notice', 'hook')).toBe(3);
    expect(await rows('tools', 'tool')).toBe(1);
    expect(await rows('memory', 'memory')).toBe(1);
    expect(await rows('notice', 'app')).toBe(0);
    expect(await t.metric(METRIC_CONTEXT_ROWS)).toBe(5);

    expect(await t.histogram(METRIC_CONTEXT_PASS_DURATION, { [ATTR_STEP_MODE]: 'first' })).toEqual({
      count: 1,
      sum: 40,
    });
    expect(await t.histogram(METRIC_CONTEXT_PASS_DURATION)).toEqual({ count: 2, sum: 50 });
    expect(await t.histogram(METRIC_PREFIX_REUSED_BYTES)).toEqual({ count: 2, sum: 4500 });
    expect(await t.histogram(METRIC_PREFIX_REUSE_RATIO, { [ATTR_STEP_MODE]: 'first' })).toEqual({
      count: 1,
      sum: 0.75,
    });
    expect(await t.histogram(METRIC_PREFIX_REUSE_RATIO, { [ATTR_STEP_MODE]: 'retry' })).toEqual({
      count: 1,
      sum: 1,
    });
  });

  it('adds no row for an empty commit and records no ratio for an empty request', async () => {
    t.contextTelemetry.stepCommitted({
      sessionId: 'ses-commit-2',
      stepId: 's1',
      mode: 'forced_completion',
      rows: [],
      durationMs: 3,
      requestBytes: 0,
      prefixReusedBytes: 0,
    });
    expect(await t.metric(METRIC_CONTEXT_ROWS)).toBe(0);
    expect(await t.histogram(METRIC_PREFIX_REUSE_RATIO)).toEqual({ count: 0, sum: 0 });
    expect(await t.histogram(METRIC_CONTEXT_PASS_DURATION)).toEqual({ count: 1, sum: 3 });
  });
});

describe('metricsText', () => {
  it('serves the Prometheus lines for skips, rows and feeds', async () => {
    t.contextTelemetry.contextSkipped({ sessionId: 'ses-prom', stepId: 's1', reason: 'hook_invalid', message: 'm' });
    t.contextTelemetry.stepCommitted({
      sessionId: 'ses-prom',
      stepId: 's1',
      mode: 'first',
      rows: [
        { kind: 'notice', source: 'hook' },
        { kind: 'notice', source: 'hook' },
      ],
      durationMs: 12,
      requestBytes: 100,
      prefixReusedBytes: 50,
    });
    t.feedTelemetry.ingested({ source: 'generic' });
    t.feedTelemetry.refused({ source: 'github', reason: 'unauthorized' });
    t.consumerTelemetry.lag({ group: 'step-context', topic: 'ticket-updates', partition: 3, lag: 42 });

    const lines = (await t.metricsText()).split('\n');
    expect(lines).toContain('# TYPE ctxflow_context_skipped_total counter');
    expect(lines).toContain(
      'ctxflow_context_skipped_total{ctxflow_skip_reason="hook_invalid",otel_scope_name="ctxflow"} 1',
    );
    expect(lines).toContain('# TYPE ctxflow_context_rows_total counter');
    expect(lines).toContain(
      'ctxflow_context_rows_total{ctxflow_row_kind="notice",ctxflow_row_source="hook",otel_scope_name="ctxflow"} 2',
    );
    expect(lines).toContain('# TYPE ctxflow_context_pass_duration histogram');
    expect(lines).toContain(
      'ctxflow_context_pass_duration_sum{ctxflow_step_mode="first",otel_scope_name="ctxflow"} 12',
    );
    expect(lines).toContain(
      'ctxflow_prompt_prefix_reuse_ratio_sum{ctxflow_step_mode="first",otel_scope_name="ctxflow"} 0.5',
    );
    expect(lines).toContain('ctxflow_feed_ingested_total{ctxflow_feed_source="generic",otel_scope_name="ctxflow"} 1');
    expect(lines).toContain(
      'ctxflow_feed_refused_total{ctxflow_feed_source="github",ctxflow_feed_reason="unauthorized",otel_scope_name="ctxflow"} 1',
    );
    expect(lines).toContain(
      'ctxflow_consumer_lag{ctxflow_consumer_group="step-context",ctxflow_topic="ticket-updates",ctxflow_partition="3",otel_scope_name="ctxflow"} 42',
    );
  });
});

describe('feed and consumer telemetry', () => {
  it('counts ingested by source and refused by source and reason', async () => {
    t.feedTelemetry.ingested({ source: 'generic' });
    t.feedTelemetry.ingested({ source: 'generic' });
    t.feedTelemetry.ingested({ source: 'jira' });
    t.feedTelemetry.refused({ source: 'generic', reason: 'unauthorized' });
    t.feedTelemetry.refused({ source: 'generic', reason: 'validation_error' });
    t.feedTelemetry.refused({ source: 'generic', reason: 'unauthorized' });

    expect(await t.metric(METRIC_FEED_INGESTED, { [ATTR_FEED_SOURCE]: 'generic' })).toBe(2);
    expect(await t.metric(METRIC_FEED_INGESTED, { [ATTR_FEED_SOURCE]: 'jira' })).toBe(1);
    expect(
      await t.metric(METRIC_FEED_REFUSED, { [ATTR_FEED_SOURCE]: 'generic', [ATTR_FEED_REASON]: 'unauthorized' }),
    ).toBe(2);
    expect(
      await t.metric(METRIC_FEED_REFUSED, { [ATTR_FEED_SOURCE]: 'generic', [ATTR_FEED_REASON]: 'validation_error' }),
    ).toBe(1);
  });

  it('keeps the last consumer lag per partition', async () => {
    t.consumerTelemetry.lag({ group: 'g1', topic: 'tu', partition: 0, lag: 10 });
    t.consumerTelemetry.lag({ group: 'g1', topic: 'tu', partition: 0, lag: 4 });
    t.consumerTelemetry.lag({ group: 'g1', topic: 'tu', partition: 1, lag: 7 });
    expect(await t.metric(METRIC_CONSUMER_LAG, { 'ctxflow.partition': 0 })).toBe(4);
    expect(await t.metric(METRIC_CONSUMER_LAG)).toBe(11);
  });
});

describe('withSpan', () => {
  it('ends one span with its name and attributes and returns what fn returns', async () => {
    const result = await t.contextTelemetry.withSpan(
      SPAN_CONTEXT_PASS,
      { 'ctxflow.session_id': 'ses-span' },
      async () => 7,
    );
    expect(result).toBe(7);
    const spans = await t.spans();
    expect(spans.map((s) => [s.name, s.attributes, s.statusCode])).toEqual([
      ['ctxflow.context_pass', { 'ctxflow.session_id': 'ses-span' }, 0],
    ]);
  });

  it('records a rejection as an ERROR span and rethrows it unchanged', async () => {
    const boom = new Error('commit refused');
    await expect(t.contextTelemetry.withSpan(SPAN_STORE_COMMIT, {}, () => Promise.reject(boom))).rejects.toBe(boom);
    const [span] = await t.spans();
    expect(span?.name).toBe('ctxflow.store.commit');
    expect(span?.statusCode).toBe(2);
    expect(span?.statusMessage).toBe('commit refused');
  });
});

describe('noop telemetry', () => {
  it('runs fn and records nothing', async () => {
    expect(await noopContextTelemetry.withSpan('x', {}, async () => 'ok')).toBe('ok');
    noopContextTelemetry.contextSkipped({ sessionId: 's', stepId: 's', reason: 'hook_error', message: 'm' });
    expect(await t.logRecords()).toEqual([]);
  });
});

describe('SimpleLogRecordProcessor 3.x', () => {
  it('exports with the options-object form and exports nothing when given the exporter positionally', async () => {
    const viaOptions = new InMemoryLogRecordExporter();
    const good = new LoggerProvider({ processors: [new SimpleLogRecordProcessor({ exporter: viaOptions })] });
    good.getLogger('pitfall').emit({ eventName: 'probe', body: 'b' });
    await good.forceFlush();
    expect(viaOptions.getFinishedLogRecords().map((r) => r.eventName)).toEqual(['probe']);
    await good.shutdown();

    // The pitfall this package avoids: a positional exporter is never called
    // (and the provider cannot even shut down).
    const viaPosition = new InMemoryLogRecordExporter();
    const bad = new LoggerProvider({
      processors: [new SimpleLogRecordProcessor(viaPosition as unknown as { exporter: InMemoryLogRecordExporter })],
    });
    bad.getLogger('pitfall').emit({ eventName: 'probe', body: 'b' });
    await bad.forceFlush();
    expect(viaPosition.getFinishedLogRecords()).toEqual([]);
    await expect(bad.shutdown()).rejects.toThrow(TypeError);
  });
});
