/**
 * Where the time goes in a V8 CPU profile (`node --cpu-prof`): self time per
 * function and per package or project folder, top entries first.
 *
 *   node bench/profile-summary.ts <file.cpuprofile> [top=25] [skip-ms=0]
 *
 * `skip-ms` leaves out the first milliseconds of the profile (start-up,
 * module loading, warm-up), so the summary shows the steady state.
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const [file, topArg, skipArg] = process.argv.slice(2);
if (!file) throw new Error('usage: node bench/profile-summary.ts <file.cpuprofile> [top] [skip-ms]');
const top = Number(topArg ?? 25);
const skipUs = Number(skipArg ?? 0) * 1000;
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));

/** `node_modules/<pkg>` or the project folder (services/x, shared/x), else the url itself. */
function area(url: string): string {
  if (!url) return '(native / V8)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  const own = /\/(services|shared|bench|scripts)\/([^/]+)/.exec(url);
  if (own) return `${own[1]}/${own[2]}`;
  if (url.startsWith('node:')) return 'node core';
  return url;
}

const selfUs = new Map<number, number>();
let total = 0;
let clock = 0;
profile.samples.forEach((id, i) => {
  const dt = profile.timeDeltas[i] ?? 0;
  clock += dt;
  if (clock < skipUs) return;
  selfUs.set(id, (selfUs.get(id) ?? 0) + dt);
  total += dt;
});

const byFunction = new Map<string, number>();
const byArea = new Map<string, number>();
for (const [id, us] of selfUs) {
  const frame = byId.get(id)!.callFrame;
  const fn = `${frame.functionName || '(anonymous)'} ${frame.url.replace(/^.*\/(node_modules|services|shared|bench)\//, '$1/')}:${frame.lineNumber + 1}`;
  byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
  byArea.set(area(frame.url), (byArea.get(area(frame.url)) ?? 0) + us);
}

const show = (title: string, map: Map<string, number>) => {
  console.log(`\n${title}`);
  for (const [name, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`${((us / total) * 100).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(6)} ms  ${name}`);
  }
};
console.log(`${file}: ${(total / 1000).toFixed(0)} ms sampled`);
show('self time by area', byArea);
show('self time by function', byFunction);
