/**
 * Property test of the context engine (services/session-runner), driven
 * directly: random sequences of adds (app with and without keys, tools, hooks,
 * repeats of each), tool calls and approvals, steps in every mode with every
 * kind of hook answer (batch, over-size, none, empty, throw, timeout, invalid),
 * tool switches, rewinds, branches, restarts, messages, thread and agent
 * context edits, clock jumps, and crashes after commit with redelivery. A
 * reference model is compared with the engine after every command (see
 * run-commands.ts for the four properties).
 *
 * CTXFLOW_PROPERTY_RUNS changes the number of runs; CTXFLOW_PROPERTY_COVERAGE=1 prints how often
 * each case was reached. fast-check prints the seed and the shrunk command list
 * on failure; replay one with `fc.assert(..., { seed, path })`.
 */
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { type Command, commandArbitrary } from './commands.ts';
import { coverage, World } from './run-commands.ts';

const NUM_RUNS = Number(process.env.CTXFLOW_PROPERTY_RUNS ?? 500);
const MAX_COMMANDS = 40;

async function play(commands: Command[]): Promise<void> {
  const world = await World.create();
  for (const command of commands) await world.run(command);
  await world.finish();
}

describe('context engine properties', () => {
  it('R3, R7, R10, R13, R15, R18, R21, R23, R26-R33: prefix stability, nothing lost or doubled, the cursor chain and the active tools hold over random sessions', async () => {
    const command = commandArbitrary();
    await fc.assert(fc.asyncProperty(fc.array(command, { maxLength: MAX_COMMANDS, size: 'max' }), play), {
      numRuns: NUM_RUNS,
    });
    if (process.env.CTXFLOW_PROPERTY_COVERAGE === '1') {
      console.log(
        [...coverage]
          .sort()
          .map(([name, count]) => `${name}: ${count}`)
          .join('\n'),
      );
    }
  }, 240_000);
});
