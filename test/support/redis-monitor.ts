/**
 * A MONITOR connection to a Redis that other test files use at the same time.
 *
 * ioredis's `redis.monitor()` enters monitoring mode in a promise callback after MONITOR's OK,
 * so on a busy server the monitor lines that arrive in the same read as the OK reach the
 * command queue instead: each is emitted as an "error" ("Command queue state error"), the
 * first rejects `monitor()` and the rest are uncaught (ioredis issue #1981; BullMQ #2505).
 * Those lines are commands run before the monitor was up, so they are dropped here; every
 * other error rejects, and once monitoring the connection's errors are ioredis's usual ones.
 */
import { Redis } from 'ioredis';

const QUEUE_STATE = 'Command queue state error';

export function monitorRedis(url: string): Promise<Redis> {
  const monitor = new Redis(url, { monitor: true, lazyConnect: false, maxRetriesPerRequest: 1 });
  return new Promise((resolve, reject) => {
    const early = (error: Error): void => {
      if (error.message.startsWith(QUEUE_STATE)) return;
      monitor.off('error', early);
      monitor.disconnect();
      reject(error);
    };
    monitor.on('error', early);
    monitor.once('monitoring', () => {
      monitor.off('error', early);
      resolve(monitor);
    });
  });
}
