import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';

/** The baseline route the benchmark server adds: answers a constant, whatever the body. */
export const BASELINE_PATH = '/bench/hello';

/** The parent's handle on a benchmark server process (http-server-child.ts). */
export interface ServerProcess {
  url: string;
  pid: number;
  /** The child's own CPU time since it started, in ms (it measures itself). */
  cpuMs(): Promise<number>;
  stop(): Promise<void>;
}

export async function startServerProcess(env: Record<string, string>, execArgv: string[] = []): Promise<ServerProcess> {
  const child: ChildProcess = fork(new URL('./http-server-child.ts', import.meta.url), [], {
    env: { ...process.env, ...env },
    execArgv,
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`benchmark server exited with ${code} before listening`)));
    child.on('message', (m: { type: string; port?: number }) => {
      if (m.type === 'listening') resolve(m.port!);
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    cpuMs: () =>
      new Promise<number>((resolve) => {
        const onMessage = (m: { type: string; ms?: number }) => {
          if (m.type !== 'cpu') return;
          child.off('message', onMessage);
          resolve(m.ms!);
        };
        child.on('message', onMessage);
        child.send({ type: 'cpu' });
      }),
    async stop() {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.send({ type: 'stop' });
      await exited;
    },
  };
}
