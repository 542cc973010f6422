import { PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { MetricReader, type ResourceMetrics } from '@opentelemetry/sdk-metrics';

/**
 * A metric reader that exports nothing by itself: metrics are collected when
 * someone asks (a GET /metrics scrape, a test). Cumulative temporality, which
 * is what Prometheus expects.
 */
export class PullMetricReader extends MetricReader {
  protected override async onShutdown(): Promise<void> {}
  protected override async onForceFlush(): Promise<void> {}

  /** Collects every instrument now; collection errors are reported through the OpenTelemetry diag logger. */
  async collectNow(): Promise<ResourceMetrics> {
    const { resourceMetrics } = await this.collect();
    return resourceMetrics;
  }
}

/**
 * Prometheus text exposition format (version 0.0.4) of `metrics`: dots in
 * names become underscores, monotonic counters get `_total`, histograms
 * `_bucket`/`_sum`/`_count`; a `target_info` line carries the resource.
 */
export function toPrometheusText(metrics: ResourceMetrics): string {
  return new PrometheusSerializer().serialize(metrics);
}
