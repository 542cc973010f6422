/**
 * Contract v2's provider formats (`POST /sessions/:id/steps { format }`).
 *
 * S5 per format: the scripted 200-step session of S5 (prefix-stability.ts), each step's neutral
 * answer converted to each provider format; what that provider caches of a body
 * (provider-formats/cached-prefix.ts: the tools, Anthropic's system, and the conversation with
 * `cache_control` dropped) must start with the previous request's of its branch, byte for byte,
 * on every step the answer does not mark `cache.rebuilt`. Share = shared bytes / previous bytes.
 * OpenAI's `prompt_cache_key` must stay the same too (it routes a request to its cache): a warm
 * step with another key is counted and fails the row.
 *
 * S9: a step in each provider format over the neutral step (`format: "neutral"`), p50 latency
 * of `POST /sessions/:id/steps` through the embedded runner app (fastify `inject`: routing,
 * the step, the conversion and the JSON of the answer; no socket). One session per format with
 * the same history (40 tool turns with a notice each, about 160 messages and a 1.5 KB system
 * prefix), and every measured step commits one new notice row, so each step converts a request
 * that grew by one row. Formats run interleaved in blocks of steps; one ratio per trial.
 */

import { createAuthenticator } from '@ctxflow/service-kit';
import {
  buildRunnerApp,
  type CachedPrefix,
  cachedPrefix,
  createEngine,
  type NeutralStepResult,
  PROVIDER_FORMATS,
  type ProviderFormat,
  prefixShare,
  providerFormats,
  weakMessageMemo,
} from '@ctxflow/session-runner';
import { cpuMs, perThousand } from './lib/cpu.ts';
import { progress } from './lib/progress.ts';
import { meets, type ScenarioResult } from './lib/report.ts';
import { median, quantile, round, summarize } from './lib/stats.ts';
import { runPrefixStability } from './prefix-stability.ts';

/** The formats as the runner's app converts (each neutral message once per format). */
const formats = providerFormats(weakMessageMemo);

/** What the provider of `format` caches of the step's request in that format. */
function prefixOf<F extends ProviderFormat>(format: F, answer: NeutralStepResult): CachedPrefix {
  return cachedPrefix[format](formats.toProviderRequest(format, answer.request, answer.cache));
}

/** S5 per format over the scripted 200-step session. */
export async function runProviderPrefix(): Promise<ScenarioResult[]> {
  const prefixes = new Map<string, Record<ProviderFormat, CachedPrefix>>();
  const shares: Record<ProviderFormat, { step: number; share: number; keyChanged: boolean }[]> = {
    'openai-chat': [],
    'openai-responses': [],
    anthropic: [],
  };
  let rebuilt = 0;
  const cpuBefore = process.cpuUsage();
  let converting = 0;
  await runPrefixStability({
    onStep: ({ step, answer, previousStepId }) => {
      const started = performance.now();
      const current = {
        'openai-chat': prefixOf('openai-chat', answer),
        'openai-responses': prefixOf('openai-responses', answer),
        anthropic: prefixOf('anthropic', answer),
      };
      converting += performance.now() - started;
      prefixes.set(answer.stepId, current);
      if (answer.cache.rebuilt) {
        rebuilt += 1;
        return;
      }
      const previous = previousStepId === undefined ? undefined : prefixes.get(previousStepId);
      if (previous === undefined) return;
      for (const format of PROVIDER_FORMATS) {
        shares[format].push({
          step,
          share: prefixShare(previous[format], current[format]),
          keyChanged: previous[format].key !== current[format].key,
        });
      }
    },
  });
  const cpu = cpuMs(cpuBefore);
  return PROVIDER_FORMATS.map((format) => {
    const list = shares[format];
    const broken = list.filter((s) => s.share !== 1);
    const rekeyed = list.filter((s) => s.keyChanged);
    const min = Math.min(...list.map((s) => s.share));
    progress(
      `S5-${format}: ${list.length} warm steps, ${broken.length} with a changed prefix, ${rekeyed.length} with a changed cache key`,
    );
    return {
      id: `S5-${format}`,
      title: `Prompt-prefix stability in the ${format} format, 200-step session`,
      ratioOf:
        'share of the previous request of the branch byte-identical in the next, in what the provider caches (warm steps: min)',
      goal: { op: '==', value: 1 },
      ratio: { median: min, min, max: Math.max(...list.map((s) => s.share)), trials: [min] },
      met: broken.length === 0 && rekeyed.length === 0,
      cpuMsPer1k: { 'engine and 3 conversions (per 1k steps)': round(perThousand(cpu, 200), 1) },
      figures: {
        'warm steps': list.length,
        'rebuilt steps': rebuilt,
        'warm steps with another prompt_cache_key than the previous': rekeyed.map((s) => s.step).join(' ') || 0,
        'conversion ms (3 formats, 200 steps)': round(converting, 1),
      },
      notes: [
        broken.length === 0
          ? 'every warm step starts with the previous request of its branch (tools and system equal, conversation a byte prefix)'
          : `warm steps with a changed prefix: ${broken.map((s) => `${s.step} (${round(s.share, 4)})`).join(', ')}`,
      ],
    };
  });
}

export interface ProviderStepOptions {
  trials: number;
  /** Steps per format per block; blocks interleave the formats. */
  stepsPerBlock: number;
  blocks: number;
}

type Format = 'neutral' | ProviderFormat;
const FORMATS: readonly Format[] = ['neutral', ...PROVIDER_FORMATS];
const TENANT_HEADERS = {};
const CONTEXT = `You are the support desk agent of Example Corp. ${'Answer tickets precisely, cite the ticket. '.repeat(30)}`;
const PARAMETERS = {
  type: 'object',
  properties: { ticket: { type: 'string' }, status: { type: 'string', enum: ['open', 'pending', 'closed'] } },
  required: ['ticket', 'status'],
  additionalProperties: false,
};

/** S9: a step in each provider format over the neutral step, p50. */
export async function runProviderSteps(options: ProviderStepOptions): Promise<ScenarioResult[]> {
  const engine = createEngine({});
  const app = buildRunnerApp({ engine, authenticate: createAuthenticator(new Map()) });
  await app.ready();
  const inject = async (method: 'POST', url: string, payload: object) => {
    const res = await app.inject({ method, url, payload, headers: TENANT_HEADERS });
    if (res.statusCode >= 300) throw new Error(`${url}: ${res.statusCode} ${res.body}`);
    return res;
  };
  const agent = (
    await inject('POST', '/agents', {
      context: CONTEXT,
      model: 'bench-model',
      tools: [
        { name: 'search', description: 'Search the knowledge base.', parameters: PARAMETERS, strict: true },
        { name: 'edit', description: 'Edit a ticket.', parameters: PARAMETERS },
        { name: 'deploy', description: 'Deploy a fix.' },
      ],
    })
  ).json().agentId;

  // One session per format, same history: 40 turns of (notice row, step, tool call with its result).
  const sessions = new Map<Format, string>();
  for (const format of FORMATS) {
    const sessionId: string = (await inject('POST', '/sessions', { agentId: agent })).json().sessionId;
    sessions.set(format, sessionId);
    await inject('POST', `/sessions/${sessionId}/messages`, { role: 'user', content: 'Work through the queue.' });
    for (let turn = 0; turn < 40; turn++) {
      await inject('POST', '/context', {
        sessionId,
        items: [{ kind: 'notice', content: `PROJ-${turn}: customer replied.` }],
      });
      await inject('POST', `/sessions/${sessionId}/steps`, { format: 'neutral' });
      const callId = `c${turn}`;
      await inject('POST', `/sessions/${sessionId}/messages`, {
        messages: [
          {
            role: 'assistant',
            content: `Turn ${turn}: editing.`,
            toolCalls: [{ callId, name: 'edit', arguments: `{"ticket":"PROJ-${turn}","status":"open"}` }],
          },
          { role: 'tool', callId, content: `PROJ-${turn} edited.` },
        ],
      });
    }
  }

  const step = async (format: Format): Promise<number> => {
    const sessionId = sessions.get(format)!;
    await inject('POST', '/context', { sessionId, items: [{ kind: 'notice', content: 'Queue moved.' }] });
    const started = performance.now();
    // The answer's JSON text is made before inject resolves.
    await inject('POST', `/sessions/${sessionId}/steps`, { format });
    return performance.now() - started;
  };

  // Warm up every path (JIT) before the trials.
  for (let i = 0; i < 30; i++) for (const format of FORMATS) await step(format);

  const ratios: Record<ProviderFormat, number[]> = { 'openai-chat': [], 'openai-responses': [], anthropic: [] };
  const p50s: Record<Format, number[]> = { neutral: [], 'openai-chat': [], 'openai-responses': [], anthropic: [] };
  const cpu: Record<Format, number> = { neutral: 0, 'openai-chat': 0, 'openai-responses': 0, anthropic: 0 };
  let steps = 0;
  for (let trial = 0; trial < options.trials; trial++) {
    const samples: Record<Format, number[]> = { neutral: [], 'openai-chat': [], 'openai-responses': [], anthropic: [] };
    for (let block = 0; block < options.blocks; block++) {
      // Rotate the order each block so no format always follows another.
      const order = FORMATS.map((_, i) => FORMATS[(i + block) % FORMATS.length]!);
      for (const format of order) {
        const before = process.cpuUsage();
        for (let i = 0; i < options.stepsPerBlock; i++) samples[format].push(await step(format));
        cpu[format] += cpuMs(before);
      }
    }
    steps += options.blocks * options.stepsPerBlock;
    for (const format of FORMATS) p50s[format].push(median(samples[format]));
    for (const format of PROVIDER_FORMATS) ratios[format].push(median(samples[format]) / median(samples.neutral));
    progress(
      `S9 trial ${trial + 1}/${options.trials}: p50 ms ${FORMATS.map((f) => `${f} ${round(median(samples[f]), 3)}`).join(', ')}; p90 neutral ${round(quantile(samples.neutral, 0.9), 3)}`,
    );
  }
  const last: NeutralStepResult = (
    await inject('POST', `/sessions/${sessions.get('neutral')!}/steps`, { format: 'neutral' })
  ).json();
  await app.close();

  return PROVIDER_FORMATS.map((format) => {
    const ratio = summarize(ratios[format]);
    const goal = { op: '<=' as const, value: 1.1 };
    return {
      id: `S9-${format}`,
      title: `A step in the ${format} format`,
      ratioOf: `p50 of POST /steps {format: "${format}"} / p50 of POST /steps {format: "neutral"}`,
      goal,
      ratio,
      met: meets(goal, ratio.median),
      cpuMsPer1k: {
        [`runner, ${format} (per 1k steps, with the POST /context before each)`]: round(
          perThousand(cpu[format], steps),
          1,
        ),
        'runner, neutral (per 1k steps, with the POST /context before each)': round(perThousand(cpu.neutral, steps), 1),
      },
      figures: {
        [`p50 ms ${format}`]: round(median(p50s[format]), 3),
        'p50 ms neutral': round(median(p50s.neutral), 3),
        'messages in the last request': last.request.messages.length,
        'steps per format per trial': options.blocks * options.stepsPerBlock,
      },
    };
  });
}
