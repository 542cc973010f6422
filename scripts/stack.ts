/**
 * `npm run stack`: the three services as separate processes on real Kafka and
 * Redis, until Ctrl-C. Uses KAFKA_BROKERS / REDIS_URL when set, otherwise
 * provisions them with scripts/infra.ts (left running; `npm run infra:down`
 * stops them). Ports: session-runner CTXFLOW_PORT (8080), feed-ingestor
 * CTXFLOW_FEED_PORT (8081), step-context CTXFLOW_STEP_CONTEXT_PORT (8082).
 * The session-runner's port serves the whole public contract (subscriptions,
 * and the feeds when CTXFLOW_FEED_SECRET_<SOURCE> is set), as `npm start` does.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { redactUrl } from '@ctxflow/service-kit';
import { ensureKafka, ensureRedis, KAFKA_BROKERS, REDIS_URL, ROOT } from './infra.ts';

const SERVICES = [
  { name: 'session-runner', entry: 'services/session-runner/src/main.ts' },
  { name: 'feed-ingestor', entry: 'services/feed-ingestor/src/main.ts' },
  { name: 'step-context', entry: 'services/step-context/src/main.ts' },
] as const;

async function main() {
  const env: NodeJS.ProcessEnv = { ...process.env };
  if (!env.KAFKA_BROKERS) {
    await ensureKafka();
    env.KAFKA_BROKERS = KAFKA_BROKERS;
  }
  if (!env.REDIS_URL && !env.REDIS_CLUSTER_NODES) {
    await ensureRedis();
    env.REDIS_URL = REDIS_URL;
  }
  const stepContextPort = env.CTXFLOW_STEP_CONTEXT_PORT ?? '8082';
  env.CTXFLOW_STEP_CONTEXT_URL ??= `http://127.0.0.1:${stepContextPort}/step-context`;
  process.stderr.write(
    // A REDIS_URL may carry a password: shown without it.
    `[stack] KAFKA_BROKERS=${env.KAFKA_BROKERS} REDIS_URL=${env.REDIS_URL ? redactUrl(env.REDIS_URL) : env.REDIS_CLUSTER_NODES}\n`,
  );

  const children: ChildProcess[] = [];
  let stopping = false;
  const stopAll = (code: number) => {
    if (stopping) return;
    stopping = true;
    for (const child of children) child.kill('SIGTERM');
    setTimeout(() => process.exit(code), 10_000).unref();
    Promise.all(children.map((c) => new Promise((r) => (c.exitCode === null ? c.once('exit', r) : r(null))))).then(() =>
      process.exit(code),
    );
  };
  for (const service of SERVICES) {
    const child = spawn(process.execPath, [join(ROOT, service.entry)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const prefix = `[${service.name}] `;
    const relay = (stream: NodeJS.ReadableStream, out: NodeJS.WritableStream) => {
      let rest = '';
      stream.on('data', (chunk: Buffer) => {
        const lines = (rest + chunk.toString()).split('\n');
        rest = lines.pop() ?? '';
        for (const line of lines) out.write(`${prefix}${line}\n`);
      });
    };
    relay(child.stdout!, process.stdout);
    relay(child.stderr!, process.stderr);
    child.on('exit', (code) => {
      if (!stopping) {
        process.stderr.write(`[stack] ${service.name} exited with ${code}: stopping the stack\n`);
        stopAll(1);
      }
    });
    children.push(child);
  }
  process.on('SIGINT', () => stopAll(0));
  process.on('SIGTERM', () => stopAll(0));
}

await main();
