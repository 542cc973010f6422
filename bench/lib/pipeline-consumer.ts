/**
 * A consumer process of the S1 pipeline bench (pipeline-child.ts), driven over IPC: it joins its
 * group before any timing, counts what it applied and reports its CPU.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';

export interface Consumer {
  child: ChildProcess;
  expect(total: number): Promise<void>;
  /** CPU ms of the whole process (every thread) and of its main thread, since it started. */
  cpuMs(): Promise<{ process: number; main: number }>;
  /** Exports the child's ended spans now (a no-op without telemetry). */
  flush(): Promise<void>;
  stop(): Promise<void>;
}

export async function startConsumer(env: Record<string, string>, execArgv: string[] = []): Promise<Consumer> {
  const child = fork(new URL('./pipeline-child.ts', import.meta.url), [], {
    env: { ...process.env, ...env },
    execArgv: [...process.execArgv, ...execArgv],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${env.BENCH_MODE} consumer not ready after 90 s`)), 90_000);
    child.once('exit', (code) => reject(new Error(`${env.BENCH_MODE} consumer exited with ${code}`)));
    child.on('message', (m: { type: string }) => {
      if (m.type === 'ready') {
        clearTimeout(timer);
        resolve();
      }
    });
  });
  const ask = <T>(message: object, answer: string, pick: (m: Record<string, unknown>) => T) =>
    new Promise<T>((resolve) => {
      const onMessage = (m: Record<string, unknown>) => {
        if (m.type !== answer) return;
        child.off('message', onMessage);
        resolve(pick(m));
      };
      child.on('message', onMessage);
      child.send(message);
    });
  return {
    child,
    expect: (total) => ask({ type: 'expect', total }, 'reached', () => undefined),
    cpuMs: () => ask({ type: 'cpu' }, 'cpu', (m) => ({ process: m.ms as number, main: m.mainMs as number })),
    async flush() {
      const error = await ask({ type: 'flush' }, 'flushed', (m) => m.error as string | undefined);
      if (error) throw new Error(`${env.BENCH_MODE} consumer: span export failed: ${error}`);
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.send({ type: 'stop' });
      await exited;
    },
  };
}
