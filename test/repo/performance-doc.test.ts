/**
 * docs/performance.md says how to run the bench and the current figures against their
 * goals, nothing else: its figures block is the one rendered from bench/results/latest.json,
 * latest.json is also kept in the history of runs under its start time, and the page holds
 * no lab-notebook traces (commit hashes, load averages).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type BenchDocument, figuresBlock, resultFileName, withFigures } from '../../bench/lib/results.ts';

const DOC = readFileSync('docs/performance.md', 'utf8');
const LATEST_TEXT = readFileSync('bench/results/latest.json', 'utf8');
const LATEST = JSON.parse(LATEST_TEXT) as BenchDocument;

describe('docs/performance.md and bench/results/', () => {
  it('performance: a run is kept under its start time in UTC, to the minute', () => {
    expect(resultFileName('2026-12-01T18:28:08.844Z')).toBe('2026-12-01T18-28Z.json');
    expect(() => resultFileName('yesterday')).toThrow('startedAt: not an ISO time: yesterday');
  });

  it('performance: the figures are those of latest.json, the rows not met named once', () => {
    expect(withFigures(DOC, LATEST)).toBe(DOC);
    const block = figuresBlock(LATEST);
    const notMet = LATEST.scenarios.filter((s) => s.goal.value !== null && !s.met).map((s) => s.id);
    expect(block).toContain(`Not met: ${notMet.join(', ')}; every other row with a goal is met.`);
    for (const s of LATEST.scenarios) {
      const row = block.split('\n').find((line) => line.startsWith(`| ${s.id} |`));
      expect(row, s.id).toContain(s.goal.value === null ? '| - |' : s.met ? '| met |' : '| **not met** |');
    }
    expect(DOC.split('figures:start').length).toBe(2);
  });

  it('performance: latest.json is in the history, and every run there is named after its start', () => {
    const runs = readdirSync('bench/results').filter((name) => name.endsWith('.json') && name !== 'latest.json');
    expect(runs).toContain(resultFileName(LATEST.startedAt));
    expect(readFileSync(`bench/results/${resultFileName(LATEST.startedAt)}`, 'utf8')).toBe(LATEST_TEXT);
    for (const name of runs) {
      const run = JSON.parse(readFileSync(`bench/results/${name}`, 'utf8')) as BenchDocument;
      expect(resultFileName(run.startedAt), name).toBe(name);
    }
  });

  it('performance: no commit hashes, load averages or notes of a stop', () => {
    const hashes = DOC.match(/`[0-9a-f]{7,40}`|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b/g) ?? [];
    expect(hashes).toEqual([]);
    expect(DOC).not.toMatch(/load average|this stop|previous run|before this/i);
  });
});
