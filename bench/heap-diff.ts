/**
 * What grows between heap snapshots (`node bench/heap-diff.ts a.heapsnapshot b.heapsnapshot [...]`):
 * the live objects of each snapshot grouped by constructor (V8's node name for objects,
 * the node type for strings, arrays, code...), their count and self bytes, the groups
 * that grew most from the first snapshot to the last, and for each of those its
 * retainers (the holder's constructor and the edge name) by count in the last.
 *
 * Snapshots of the soak's session-runner come from `npm run bench -- --only=soak
 * --heap-snapshot --heap-snapshot-every=N`. Run it with a big heap: a snapshot's JSON
 * is a few times the heap it shows (`node --max-old-space-size=6144 bench/heap-diff.ts ...`).
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

interface Snapshot {
  snapshot: {
    meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] };
    node_count: number;
  };
  nodes: number[];
  edges: number[];
  strings: string[];
}

interface Group {
  count: number;
  bytes: number;
}

interface Parsed {
  groups: Map<string, Group>;
  total: number;
  /** Group of each node, by node ordinal. */
  groupOf: string[];
  /** Retainer label (`<holder group>.<edge>`) counts per retained group, filled by retainersOf. */
  snap: Snapshot;
}

function groupName(type: string, name: string): string {
  if (type === 'object' || type === 'closure' || type === 'native')
    return `${type === 'object' ? '' : `${type} `}${name}`;
  if (type === 'string' || type === 'concatenated string' || type === 'sliced string') return '(string)';
  return `(${type})`;
}

function parse(file: string): Parsed {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const { node_fields: nf, node_types: nt } = snap.snapshot.meta;
  const width = nf.length;
  const typeAt = nf.indexOf('type');
  const nameAt = nf.indexOf('name');
  const sizeAt = nf.indexOf('self_size');
  const types = nt[0];
  const groups = new Map<string, Group>();
  const groupOf: string[] = [];
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const name = groupName(types[snap.nodes[i + typeAt]!]!, snap.strings[snap.nodes[i + nameAt]!]!);
    const size = snap.nodes[i + sizeAt]!;
    const g = groups.get(name) ?? { count: 0, bytes: 0 };
    g.count += 1;
    g.bytes += size;
    groups.set(name, g);
    groupOf.push(name);
    total += size;
  }
  return { groups, total, groupOf, snap };
}

/** For nodes of `wanted` groups: `<holder group>.<edge name>` -> how many such edges (weak edges left out). */
function retainersOf(parsed: Parsed, wanted: Set<string>): Map<string, Map<string, number>> {
  const { snap, groupOf } = parsed;
  const { node_fields: nf, edge_fields: ef, edge_types: et } = snap.snapshot.meta;
  const width = nf.length;
  const edgeWidth = ef.length;
  const edgeCountAt = nf.indexOf('edge_count');
  const edgeTypeAt = ef.indexOf('type');
  const edgeNameAt = ef.indexOf('name_or_index');
  const toAt = ef.indexOf('to_node');
  const edgeTypes = et[0];
  const out = new Map<string, Map<string, number>>();
  let edge = 0;
  for (let n = 0; n < groupOf.length; n++) {
    const count = snap.nodes[n * width + edgeCountAt]!;
    for (let e = 0; e < count; e++, edge += edgeWidth) {
      const type = edgeTypes[snap.edges[edge + edgeTypeAt]!]!;
      if (type === 'weak' || type === 'shortcut') continue;
      const target = groupOf[snap.edges[edge + toAt]! / width]!;
      if (!wanted.has(target)) continue;
      const raw = snap.edges[edge + edgeNameAt]!;
      const label = type === 'element' || type === 'hidden' ? `[${type}]` : snap.strings[raw]!;
      const key = `${groupOf[n]}.${label}`;
      const per = out.get(target) ?? new Map<string, number>();
      per.set(key, (per.get(key) ?? 0) + 1);
      out.set(target, per);
    }
  }
  return out;
}

const files = process.argv.slice(2);
if (files.length < 2) {
  process.stderr.write('usage: node bench/heap-diff.ts <first.heapsnapshot> <...> <last.heapsnapshot>\n');
  process.exit(2);
}
const mib = (b: number) => (b / 2 ** 20).toFixed(1);
const parsed: Parsed[] = [];
for (const file of files) {
  const p = parse(file);
  process.stdout.write(`${basename(file)}: ${mib(p.total)} MiB self size, ${p.groupOf.length} nodes\n`);
  // Only the first and last keep their node arrays; the middle ones keep their groups.
  parsed.push(parsed.length === 0 || file === files.at(-1) ? p : { ...p, groupOf: [], snap: undefined as never });
}
const first = parsed[0]!;
const last = parsed.at(-1)!;
const grown = [...last.groups.entries()]
  .map(([name, g]) => ({ name, g, before: first.groups.get(name) ?? { count: 0, bytes: 0 } }))
  .map((x) => ({ ...x, dBytes: x.g.bytes - x.before.bytes, dCount: x.g.count - x.before.count }))
  .sort((a, b) => b.dBytes - a.dBytes)
  .slice(0, 20);
process.stdout.write('\ngroup | count per snapshot | MiB per snapshot | growth MiB first -> last\n');
for (const x of grown) {
  const counts = parsed.map((p) => p.groups.get(x.name)?.count ?? 0).join(' ');
  const bytes = parsed.map((p) => mib(p.groups.get(x.name)?.bytes ?? 0)).join(' ');
  process.stdout.write(`${x.name} | ${counts} | ${bytes} | +${mib(x.dBytes)}\n`);
}
const wanted = new Set(grown.slice(0, 8).map((x) => x.name));
const retainers = retainersOf(last, wanted);
process.stdout.write('\nretainers in the last snapshot (holder.edge: count), of the groups that grew most\n');
for (const name of wanted) {
  const top = [...(retainers.get(name) ?? new Map()).entries()].sort((a, b) => b[1] - a[1]).slice(0, 8);
  process.stdout.write(`${name}: ${top.map(([k, n]) => `${k} ${n}`).join('; ')}\n`);
}

/**
 * Retainer chains of up to 200 nodes of `group` in the last snapshot (each: its first strong
 * retainer, then that one's, up to 10 links, stopping at a node of a named constructor other
 * than Object and Array), aggregated.
 */
/** Holders a chain walks through: containers, not owners. */
const PLAIN = new Set(['Object', 'Array', '(array)', '(string)', 'Map', 'Set', 'Listener', '(hidden)']);

function chains(parsed: Parsed, group: string): Map<string, number> {
  const { snap, groupOf } = parsed;
  const { node_fields: nf, edge_fields: ef, edge_types: et } = snap.snapshot.meta;
  const width = nf.length;
  const edgeWidth = ef.length;
  const edgeCountAt = nf.indexOf('edge_count');
  const edgeTypeAt = ef.indexOf('type');
  const edgeNameAt = ef.indexOf('name_or_index');
  const toAt = ef.indexOf('to_node');
  const edgeTypes = et[0];
  // First strong retainer of each node: [holder ordinal, edge label].
  const holder = new Int32Array(groupOf.length).fill(-1);
  const label: string[] = new Array(groupOf.length);
  let edge = 0;
  for (let n = 0; n < groupOf.length; n++) {
    const count = snap.nodes[n * width + edgeCountAt]!;
    for (let e = 0; e < count; e++, edge += edgeWidth) {
      const type = edgeTypes[snap.edges[edge + edgeTypeAt]!]!;
      if (type === 'weak' || type === 'shortcut' || groupOf[n] === '(hidden)' || groupOf[n] === '(code)') continue;
      const to = snap.edges[edge + toAt]! / width;
      if (holder[to] !== -1) continue;
      holder[to] = n;
      const raw = snap.edges[edge + edgeNameAt]!;
      label[to] = type === 'element' ? '[]' : type === 'hidden' ? '[h]' : snap.strings[raw]!;
    }
  }
  const out = new Map<string, number>();
  const all: number[] = [];
  for (let n = 0; n < groupOf.length; n++) if (groupOf[n] === group && holder[n] !== -1) all.push(n);
  const step = Math.max(1, Math.floor(all.length / 2_000));
  for (let s = 0; s < all.length; s += step) {
    const n = all[s]!;
    const path: string[] = [];
    let at = n;
    for (let i = 0; i < 24 && holder[at] !== -1; i++) {
      path.push(label[at]!);
      at = holder[at]!;
      const g = groupOf[at]!;
      if (!PLAIN.has(g)) {
        path.push(`<${g}>`);
        break;
      }
    }
    const key = path.reverse().join(' ');
    out.set(key, (out.get(key) ?? 0) + 1);
  }
  return out;
}

for (const group of (process.env.HEAP_CHAINS ?? '').split(',').filter(Boolean)) {
  process.stdout.write(`\nretainer chains of ${group} (2,000 sampled, in the last snapshot):\n`);
  for (const [k, n] of [...chains(last, group).entries()].sort((a, b) => b[1] - a[1]).slice(0, 12)) {
    process.stdout.write(`${n} ${k}\n`);
  }
}
