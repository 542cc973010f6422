/**
 * The soak's rows (bench/soak.ts): from the samples of a run, per minute, the throughput, CPU per
 * returned KiB (full steps), each process's RSS peak against its memory limit, and the errors.
 */

import { meets, type ScenarioResult } from './report.ts';
import { PRESETS, type SoakPreset } from './soak-load.ts';
import type { Service, ServiceName } from './soak-processes.ts';
import { round } from './stats.ts';

const THROUGHPUT_GOAL = { op: '>=' as const, value: 0.8 };
/** VmHWM at most 450 MiB of a 512Mi limit (0.88): room for a spike before the kernel's OOM kill. */
const RSS_GOAL = { op: '<=' as const, value: 0.88 };
const ERRORS_GOAL = { op: '==' as const, value: 0 };
/** The goal of a full-steps run: session-runner CPU per returned kilobyte, last minute over the second. */
const CPU_PER_KB_GOAL = { op: '<=' as const, value: 1.2 };

/** What a run leaves for its rows. */
export interface SoakRun {
  presetName: SoakPreset;
  minutes: number;
  /** The load's shape, for the rows' notes. */
  setupNote: string;
  services: Service[];
  deployed: Record<ServiceName, { env: Record<string, string>; memoryLimitBytes: number }>;
  /** One sample per period. */
  curve: Record<string, unknown>[];
  rssPeaks: Record<ServiceName, number>;
  /** Requests and failures before the load (creating the agent, sessions, subscriptions). */
  setup: { requests: number; errors: number };
  errors: string[];
  aborted: string | undefined;
}

/** The soak's rows from its run. */
export function soakResults(runData: SoakRun): ScenarioResult[] {
  const { presetName, setupNote, services, deployed, curve, rssPeaks, setup, errors, aborted } = runData;
  const options = { minutes: runData.minutes };
  const preset = PRESETS[presetName];
  const perMinute = 60_000 / preset.periodMs;
  const periods = options.minutes * perMinute;
  const logErrors = services.flatMap((s) => s.errorLines.map((line) => `${s.name}: ${line}`));
  const requestErrors = setup.errors + curve.reduce((n, p) => n + (p.errors as number), 0);
  const totalErrors = requestErrors + logErrors.length + (aborted ? 1 : 0);
  // Per minute, from the periods: operations, CPU of each process, returned KiB.
  const minutes = Array.from({ length: Math.ceil(curve.length / perMinute) }, (_, m) => {
    const of = curve.slice(m * perMinute, (m + 1) * perMinute);
    const sum = (f: (p: Record<string, unknown>) => number) => of.reduce((n, p) => n + f(p), 0);
    const kib = sum((p) => p.stepKiB as number);
    const cpuOf = (name: ServiceName) => sum((p) => (p.cpuMs as Record<string, number>)[name]!);
    return {
      ops: sum((p) => p.ops as number),
      kib,
      cpuMsPerOp: Object.fromEntries(
        services.map((s) => [
          s.name,
          round(
            cpuOf(s.name) /
              Math.max(
                sum((p) => p.ops as number),
                1,
              ),
            3,
          ),
        ]),
      ),
      runnerCpuMsPerKiB: kib > 0 ? cpuOf('session-runner') / kib : Number.NaN,
      rssMiB: (of.at(-1)?.rssMiB ?? {}) as Record<string, number>,
      whole: of.length === perMinute,
    };
  });
  const complete = curve.length === periods;
  // The load's first minute warms the held sessions and JIT; from the second on, the shape.
  const base = perMinute === 1 ? minutes[0] : minutes[1];
  const last = minutes.at(-1);
  const ratio = base?.ops && last && complete ? last.ops / base.ops : Number.NaN;
  const cpuRatio = base && last && complete ? last.runnerCpuMsPerKiB / base.runnerCpuMsPerKiB : Number.NaN;
  const one = (value: number) => ({
    median: round(value),
    min: round(value),
    max: round(value),
    trials: [round(value)],
  });
  const load = curve.map((p) => p.loadAverage1m as number);
  const loadNote = `load average (1 min) per ${preset.periodMs / 1000} s: ${load.join(' ')}`;
  const baseName = perMinute === 1 ? 'the first' : 'the second';
  const results: ScenarioResult[] = [
    {
      id: 'SOAK-throughput',
      title: `Soak (${presetName}), ${options.minutes} min at steady load, heaps capped as deployed`,
      ratioOf: `operations in the last minute / in ${baseName}`,
      goal: preset.since ? THROUGHPUT_GOAL : { op: '>=', value: Number.NaN },
      ratio: one(ratio),
      met: preset.since ? meets(THROUGHPUT_GOAL, ratio) : true,
      // Per 1,000 operations, each process, in the base and the last minute.
      cpuMsPer1k: Object.fromEntries(
        services.flatMap((s) =>
          (
            [
              [`${baseName.slice(4)} minute`, base],
              ['last minute', last],
            ] as const
          ).map(([when, m]) => [`${s.name} ${when}`, round((m?.cpuMsPerOp[s.name] ?? Number.NaN) * 1000, 0)]),
        ),
      ),
      figures: {
        'operations per minute': minutes.map((m) => m.ops).join(' '),
        'session-runner CPU ms/KiB returned per minute': minutes.map((m) => round(m.runnerCpuMsPerKiB, 4)).join(' '),
        'step KiB returned per minute': minutes.map((m) => round(m.kib, 0)).join(' '),
        'step p50 ms first/last period': `${curve[0]?.stepP50Ms}/${curve.at(-1)?.stepP50Ms}`,
        'rows delivered in steps': curve.reduce((n, p) => n + (p.rowsInSteps as number), 0),
      },
      notes: [setupNote, loadNote, ...(aborted ? [`aborted: ${aborted}`] : [])],
      curve,
    },
    ...(preset.since
      ? []
      : [
          {
            id: 'SOAK-cpu-per-kib',
            title: `Soak (${presetName}), session-runner CPU per returned KiB stays flat`,
            ratioOf: `session-runner CPU ms per KiB of step answers, last minute / ${baseName}`,
            goal: CPU_PER_KB_GOAL,
            ratio: one(cpuRatio),
            met: meets(CPU_PER_KB_GOAL, cpuRatio),
            cpuMsPer1k: {},
            figures: {
              'CPU ms/KiB per minute': minutes.map((m) => round(m.runnerCpuMsPerKiB, 4)).join(' '),
            },
          } satisfies ScenarioResult,
        ]),
    ...services.map((s): ScenarioResult => {
      const limit = deployed[s.name].memoryLimitBytes;
      const share = rssPeaks[s.name] / limit;
      return {
        id: `SOAK-rss-${s.name}`,
        title: `Soak (${presetName}), ${s.name} RSS peak within its memory limit`,
        ratioOf: `VmHWM / the Deployment's limits.memory (${limit / 2 ** 20} MiB; 0.88 is 450 MiB of 512)`,
        goal: RSS_GOAL,
        ratio: one(share),
        met: !aborted && meets(RSS_GOAL, share),
        cpuMsPer1k: {},
        figures: {
          NODE_OPTIONS: deployed[s.name].env.NODE_OPTIONS!,
          'RSS MiB per minute': minutes.map((m) => m.rssMiB[s.name]).join(' '),
          ...(perMinute === 1
            ? {}
            : {
                [`RSS MiB per ${preset.periodMs / 1000} s`]: curve
                  .map((p) => (p.rssMiB as Record<string, number>)[s.name])
                  .join(' '),
              }),
          'peak MiB': round(rssPeaks[s.name] / 2 ** 20, 1),
        },
      };
    }),
    {
      id: 'SOAK-errors',
      title: 'Soak, errors',
      ratioOf: 'non-2xx answers, failed requests, skipped step context, error log lines, exits',
      goal: ERRORS_GOAL,
      ratio: one(totalErrors),
      met: meets(ERRORS_GOAL, totalErrors),
      cpuMsPer1k: {},
      figures: {
        requests: setup.requests + curve.reduce((n, p) => n + (p.requests as number), 0),
        'failed requests and skipped step context': requestErrors,
        'error log lines': logErrors.length,
        exits: aborted ? 1 : 0,
      },
      notes: [...errors, ...logErrors.slice(0, 10)],
    },
  ];
  return results;
}
