/**
 * Fault: kill -9 of the session-runner between its commit and its answer, then
 * redelivery of the same step request. The runner consumes step requests from
 * Kafka while app items arrive over HTTP; it is killed at random moments, and
 * some kills are aimed: a helper process on Redis MONITOR sees the commit
 * script record a request and freezes the runner at once (SIGSTOP); if its answer is
 * not on TOPICS.stepResults a second later the kill fell between commit and
 * answer. After each kill the runner restarts and Kafka redelivers.
 *
 * Exactly once: every requestId committed once, in order per session; every
 * item in the log once, in order; every request answered, every answer naming
 * the one step committed for it.
 */
import { describe, expect, it } from 'vitest';
import { cleanupsAfterAll, roundsUntilStopped, startRunnerRig } from './load-rig.ts';
import { between, freezeOnCommit, PrivateRedis, sleep } from './processes.ts';

const KILLS = ['aimed', 'random', 'aimed', 'aimed'] as const;

describe('fault: kill -9 of the session-runner between commit and answer', () => {
  const cleanups = cleanupsAfterAll();

  it('random and aimed kill -9 while step requests stream: each requestId committed once, every request answered with its one step', async () => {
    // A private Redis: MONITOR sees only this test's commits.
    const redisServer = await PrivateRedis.start({ aof: false });
    cleanups.push(() => redisServer.stop());
    const {
      prefix,
      checker,
      runner,
      steps: load,
    } = await startRunnerRig({
      tag: 'f2',
      label: 'session-runner kill -9 between commit and answer',
      cleanups,
      redisUrl: redisServer.url,
      sessions: 6,
    });

    const started = Date.now();
    const stepping = roundsUntilStopped(load, 80, 10);

    const betweenCommitAndAnswer: { requestId: string; stepId: string }[] = [];
    try {
      const plan: ('aimed' | 'random')[] = [...KILLS];
      for (let k = 0; k < plan.length; k++) {
        const kind = plan[k]!;
        await sleep(between(300, 1_500));
        if (kind === 'random') {
          await runner.kill9();
          checker.fault('kill -9 session-runner at a random moment');
        } else {
          // A helper process on MONITOR freezes the runner (SIGSTOP) as its commit script records a request.
          const freezer = await freezeOnCommit(redisServer.port, prefix, runner.pid);
          let timer: NodeJS.Timeout | undefined;
          const commit = await Promise.race([
            freezer.commit,
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new Error('no commit within 20 s')), 20_000);
            }),
          ]).finally(() => {
            clearTimeout(timer);
            freezer.cancel();
          });
          // Frozen right after the commit: is its answer out? (The results consumer sees one in milliseconds.)
          await sleep(1_000);
          const answered = load.answered(commit.requestId);
          await runner.kill9();
          if (!answered) betweenCommitAndAnswer.push(commit);
          checker.fault(
            `kill -9 session-runner after committing ${commit.requestId} ${answered ? 'and answering' : 'before answering'}`,
          );
        }
        await runner.start();
        // The freeze races the runner's answer; aim again (a few times at most) until one landed in between.
        if (k === plan.length - 1 && betweenCommitAndAnswer.length === 0 && plan.length < KILLS.length + 3) {
          plan.push('aimed');
        }
      }
    } finally {
      await stepping.stop();
    }

    await load.waitForResults(60_000);
    const landed = await load.landed();
    const report = checker.check(landed.streams);
    const results = load.checkResults(landed.stepOf);
    process.stdout.write(
      `[exactly-once] ${load.requested.length} step requests, ${betweenCommitAndAnswer.length} kill(s) between commit and answer, ` +
        `${results.repeated} repeated answer(s), ${results.foreign} answer(s) from other runner groups; ${Date.now() - started} ms\n`,
    );
    expect(results.problems.slice(0, 10)).toEqual([]);
    expect(landed.queued).toBe(0); // every item was delivered by some step
    expect(report.faults).toBeGreaterThanOrEqual(KILLS.length);
    // At least one kill fell between commit and answer, and the redelivery answered THAT step.
    expect(betweenCommitAndAnswer.length).toBeGreaterThan(0);
    for (const { requestId, stepId } of betweenCommitAndAnswer) {
      expect(landed.stepOf.get(requestId)).toBe(stepId);
      const ours = load.results.get(requestId)?.filter((r) => r.ok) ?? [];
      expect(new Set(ours.map((r) => r.stepId))).toEqual(new Set([stepId]));
    }
    await runner.stop();
  }, 90_000);
});
