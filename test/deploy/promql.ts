/**
 * PromQL read with Prometheus's own grammar (@prometheus-io/lezer-promql, the parser of the
 * Prometheus web UI's editor) and the metrics a scrape exports, for checking that the alert
 * rules and the dashboard's queries are PromQL and name only what the services export.
 */
import { parser } from '@prometheus-io/lezer-promql';

/** What one expression names, or why it is not PromQL. */
export interface PromqlReading {
  /** Syntax errors (the parse tree's error nodes) and selectors without a metric name. */
  errors: string[];
  /** The metric name of every vector selector, in order of appearance. */
  metrics: string[];
  /** Every label name the expression uses: matchers, `by`/`without`, `on`/`ignoring`, `group_left/right`. */
  labels: string[];
}

/**
 * Grafana's built-in interval variables, as Grafana replaces them before a query reaches
 * Prometheus; dashboard variables (`$namespace`) only appear inside label values.
 */
export function interpolateGrafana(expr: string): string {
  return expr.replace(/\$__(rate_interval|interval|range)\b/g, '5m').replace(/\$\{?namespace\}?/g, 'ctxflow');
}

export function readPromql(expr: string): PromqlReading {
  const tree = parser.parse(expr);
  const errors: string[] = [];
  const metrics: string[] = [];
  const labels: string[] = [];
  tree.iterate({
    enter(node) {
      const text = expr.slice(node.from, node.to);
      if (node.type.isError) {
        const near = expr.slice(node.from, node.from + 20);
        errors.push(`syntax error at ${node.from}: ${near === '' ? 'the expression ends too early' : `"${near}"`}`);
        return;
      }
      if (node.name === 'VectorSelector') {
        const name = node.node.getChild('Identifier');
        if (name) metrics.push(expr.slice(name.from, name.to));
        else errors.push(`selector without a metric name at ${node.from}: "${text}"`);
      } else if (node.name === 'LabelName') {
        labels.push(text);
      }
    },
  });
  // `__name__` would name a metric the check above does not see.
  if (labels.includes('__name__')) errors.push('a metric named by a __name__ matcher');
  return { errors: [...new Set(errors)], metrics, labels: [...new Set(labels)] };
}

/** One exported sample family: its sample name (`_bucket`, `_sum`, `_count`, `_total` included) and label names. */
export type Exported = ReadonlyMap<string, ReadonlySet<string>>;

/**
 * The sample names of a Prometheus text exposition with the label names each carries
 * (`le` for buckets), from the sample lines (comments ignored).
 */
export function exportedMetrics(exposition: string): Map<string, Set<string>> {
  const found = new Map<string, Set<string>>();
  for (const line of exposition.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s/.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels = found.get(match[1]!) ?? new Set<string>();
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"/g)) labels.add(pair[1]!);
    found.set(match[1]!, labels);
  }
  return found;
}

/**
 * The labels Prometheus adds to every scraped series (the Prometheus Operator's ServiceMonitor
 * targets): usable in any query beside the metric's own.
 */
export const TARGET_LABELS = ['namespace', 'service', 'pod', 'container', 'endpoint', 'job', 'instance'] as const;

/**
 * Every problem of one expression: syntax, a metric the exposition does not have, a label
 * none of its metrics (nor the target) carries. `where` names it in the messages.
 */
export function promqlProblems(expr: string, exported: Exported, where: string): string[] {
  const { errors, metrics, labels } = readPromql(expr);
  const problems = errors.map((e) => `${where}: ${e}`);
  if (metrics.length === 0 && errors.length === 0) problems.push(`${where}: names no metric`);
  const known = new Set<string>(TARGET_LABELS);
  for (const metric of metrics) {
    const own = exported.get(metric);
    if (!own) problems.push(`${where}: metric "${metric}" is not exported`);
    else for (const label of own) known.add(label);
  }
  for (const label of labels) {
    if (!known.has(label)) problems.push(`${where}: label "${label}" is on none of its metrics`);
  }
  return problems;
}
