import type { RatioSummary } from './stats.ts';

/** A goal on a ratio: `ratio >= value` or `ratio <= value`. */
export interface Goal {
  op: '>=' | '<=' | '==';
  value: number;
}

/** One line of the summary: a ratio to a baseline measured in the same run. */
export interface ScenarioResult {
  id: string;
  title: string;
  /** What the ratio divides, e.g. "POST /context req/s / hello-route req/s". */
  ratioOf: string;
  goal: Goal;
  ratio: RatioSummary;
  met: boolean;
  /** CPU milliseconds per 1,000 messages, per process (label -> median over trials). */
  cpuMsPer1k: Record<string, number>;
  /** Absolute figures behind the ratio (medians over trials), for the record. */
  figures: Record<string, number | string>;
  /**
   * A row measured along an axis: one point per value of it (S7: medians over trials), or
   * over time (the soak: one point per minute, with figures per process).
   */
  curve?: Record<string, unknown>[];
  notes?: string[];
}

/** A scenario left out of this run, and why. */
export interface SkippedScenario {
  id: string;
  title: string;
  reason: string;
}

export function meets(goal: Goal, value: number): boolean {
  if (goal.op === '>=') return value >= goal.value;
  if (goal.op === '<=') return value <= goal.value;
  return value === goal.value;
}
