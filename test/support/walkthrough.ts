import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** The walkthrough's fenced block tagged `name` (docs/walkthrough.md, linked from the README). */
export function walkthroughBlock(name: string): string {
  const doc = readFileSync('docs/walkthrough.md', 'utf8');
  const match = new RegExp(`\`\`\`[a-z]+ ${name}\\n([\\s\\S]*?)\\n\`\`\``).exec(doc);
  if (!match) throw new Error(`docs/walkthrough.md has no block tagged ${name}`);
  return match[1]!;
}

/**
 * The shown output as a pattern, line by line: `<name>` stands for one value of the run
 * (no quote, no space), the same value wherever the name appears in that run.
 */
export function normalize(template: string, actual: string): { text: string; values: Map<string, string> } {
  const values = new Map<string, string>();
  const want = template.split('\n');
  const lines = actual.split('\n').map((line, i) => {
    const shown = want[i];
    if (shown === undefined) return line;
    const names: string[] = [];
    const source = shown
      .split(/(<[a-z]+>)/)
      .map((part) => {
        const name = /^<([a-z]+)>$/.exec(part)?.[1];
        if (!name) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
        names.push(name);
        return '([^"\\s]+)';
      })
      .join('');
    const match = new RegExp(`^${source}$`).exec(line);
    if (!match) return line;
    const bound = names.map((name, k) => [name, match[k + 1]!] as const);
    if (bound.some(([name, value]) => (values.get(name) ?? value) !== value)) return line;
    for (const [name, value] of bound) values.set(name, value);
    return shown;
  });
  return { text: lines.join('\n'), values };
}

/**
 * Runs the walkthrough script verbatim with `CTXFLOW` set to `base` (and `env` added); its output
 * normalized against the shown output, with its stderr and exit status. Asynchronous: the server
 * may run in this process.
 */
export async function runWalkthrough(base: string, env: Record<string, string> = {}) {
  // stdin from /dev/null: on a socket (node's default pipe) with SHLVL unset, Debian's bash
  // sources /etc/bash.bashrc as for a remote shell, and `-u` fails on its PS1.
  const child = spawn('bash', ['-euo', 'pipefail', '-c', walkthroughBlock('walkthrough')], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env, CTXFLOW: base },
    timeout: 30_000,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const status = await new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { stderr, status, ...normalize(walkthroughBlock('walkthrough-output').trim(), stdout.trim()) };
}
