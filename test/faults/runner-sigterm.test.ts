/**
 * Lifecycle: SIGTERM of the session-runner while step requests stream in from
 * Kafka. The runner stops taking work, finishes the step in flight, commits
 * its offsets and exits 0; restarted, it answers the rest. Every request is
 * answered with its one committed step, none is committed twice, and, because
 * the offsets were committed on the way out, none is answered twice either.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { requireRedis } from '../support/services.ts';
import { cleanupsAfterAll, roundsUntilStopped, startRunnerRig } from './load-rig.ts';
import { between, deletePrefix, sleep } from './processes.ts';

const STOPS = 2;
/** Step requests per session published just before each SIGTERM. */
const BURST_PER_SESSION = 100;

describe('lifecycle: SIGTERM of the session-runner mid-stream', () => {
  const cleanups = cleanupsAfterAll();

  it('SIGTERM while step requests stream: it exits cleanly, and after restarts every request is answered once with its one step', async () => {
    const redis = new Redis(requireRedis());
    const {
      prefix,
      checker,
      runner,
      steps: load,
    } = await startRunnerRig({
      tag: 'sigterm',
      label: 'session-runner SIGTERM mid-stream',
      cleanups,
      redisUrl: requireRedis(),
      sessions: 6,
      logLevel: 'info',
    });
    cleanups.push(async () => {
      await deletePrefix(redis, prefix);
      redis.disconnect();
    });

    const stepping = roundsUntilStopped(load, 50, 10);

    const pendingAtStop: number[] = [];
    const backlogBegun: boolean[] = [];
    try {
      for (let stop = 0; stop < STOPS; stop++) {
        await sleep(between(800, 1_500));
        // A backlog, and the SIGTERM once the runner has begun answering it: the stop lands mid-stream
        // however fast the runner keeps up with the steady rounds.
        const backlog = await load.burst(BURST_PER_SESSION);
        const deadline = Date.now() + 10_000;
        while (!backlog.some((id) => load.answered(id)) && Date.now() < deadline) await sleep(5);
        backlogBegun.push(backlog.some((id) => load.answered(id)));
        pendingAtStop.push(load.requested.filter((id) => !load.answered(id)).length);
        await runner.stop(20_000);
        checker.fault(`SIGTERM session-runner #${runner.incarnation}`);
        const own = runner.logs.filter((l) => l.incarnation === runner.incarnation);
        // Graceful: every shutdown step ran and none failed (a kill after the grace period logs nothing).
        expect(own.some((l) => l.msg === 'session-runner: stopped' && l.failed === false)).toBe(true);
        await runner.start();
      }
    } finally {
      await stepping.stop();
    }

    await load.waitForResults(60_000);
    const landed = await load.landed();
    const report = checker.check(landed.streams);
    const results = load.checkResults(landed.stepOf);
    process.stdout.write(
      `[sigterm] ${load.requested.length} step requests, pending at each SIGTERM: ${pendingAtStop.join(', ')}; ` +
        `${results.repeated} repeated answer(s)\n`,
    );
    expect(results.problems.slice(0, 10)).toEqual([]);
    expect(landed.queued).toBe(0);
    expect(report.faults).toBe(STOPS);
    // Stopped mid-stream: each SIGTERM came once the runner was answering a backlog, with requests
    // still waiting for an answer.
    expect(backlogBegun).toEqual(Array(STOPS).fill(true));
    expect(pendingAtStop.every((n) => n > 0)).toBe(true);
    // Offsets were committed on the way out: nothing was redelivered, so nothing was answered twice.
    expect(results.repeated).toBe(0);
    await runner.stop();
  }, 120_000);
});
