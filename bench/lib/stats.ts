/** Small statistics over samples; every function leaves its input unsorted. */

export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

export const median = (values: readonly number[]): number => quantile(values, 0.5);

/** A ratio measured once per trial, summarized as the report shows it. */
export interface RatioSummary {
  median: number;
  min: number;
  max: number;
  /** One ratio per trial, in trial order. */
  trials: number[];
}

export function summarize(trials: readonly number[]): RatioSummary {
  return { median: median(trials), min: Math.min(...trials), max: Math.max(...trials), trials: [...trials] };
}

/** Rounds for reports: 3 significant decimals for ratios, 1 for milliseconds. */
export function round(value: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
