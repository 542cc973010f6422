/**
 * A helper process of the fault tests (not a test): watches Redis MONITOR and
 * freezes a session-runner with SIGSTOP the moment its commit script records a
 * step request, so the runner stops between its commit and its answer.
 *
 * Usage: node freeze-on-commit.ts <redisPort> <keyPrefix> <runnerPid>
 * Prints `ready` once MONITOR is on, then one JSON line `{ requestId, stepId }`
 * of the commit it froze the runner at, and exits.
 *
 * Its own process with nothing else on its event loop, reading the raw MONITOR
 * text: the freeze follows the commit within a fraction of a millisecond, while
 * the runner still has its answer to render and publish.
 */
import { connect } from 'node:net';

const [port, prefix, pid] = process.argv.slice(2);
if (!port || !prefix || !pid) {
  process.stderr.write('usage: freeze-on-commit.ts <redisPort> <keyPrefix> <runnerPid>\n');
  process.exit(2);
}

const escaped = prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
// commit-step.lua: HSET <prefix>:{<sessionId>}:requests <requestId> <stepId>, fed to MONITOR as `[0 lua] "HSET" ...`.
const COMMIT = new RegExp(`\\[\\d+ lua\\] "HSET" "${escaped}:\\{[^}]+\\}:requests" "([^"]+)" "([^"]+)"`);

const socket = connect(Number(port), '127.0.0.1');
socket.setNoDelay(true);
let text = '';
let ready = false;
socket.on('connect', () => socket.write('MONITOR\r\n'));
socket.on('data', (chunk: Buffer) => {
  text += chunk.toString('utf8');
  if (!ready) {
    if (!text.startsWith('+OK\r\n')) return;
    ready = true;
    text = text.slice(5);
    process.stdout.write('ready\n');
  }
  const match = COMMIT.exec(text);
  if (match) {
    process.kill(Number(pid), 'SIGSTOP');
    process.stdout.write(`${JSON.stringify({ requestId: match[1], stepId: match[2] })}\n`);
    socket.destroy();
    process.exit(0);
  }
  // Keep only the unfinished last line.
  const end = text.lastIndexOf('\n');
  if (end >= 0) text = text.slice(end + 1);
});
socket.on('error', (err) => {
  process.stderr.write(`freeze-on-commit: ${err.message}\n`);
  process.exit(1);
});
