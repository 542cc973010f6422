/**
 * A stream follower costs the server bounded memory. The replay a stream
 * opens with holds the newest chunks within STREAM_REPLAY_BYTES (older ones
 * are counted in one `replay_truncated` event), and a follower whose client
 * does not read is dropped (its connection destroyed) once more than
 * STREAM_BUFFER_BYTES wait unread, instead of the server buffering every
 * message for it.
 */
import { connect, type Socket } from 'node:net';
import { createAuthenticator } from '@ctxflow/service-kit';
import {
  buildRunnerApp,
  createEngine,
  STREAM_BUFFER_BYTES,
  STREAM_REPLAY_BYTES,
  StreamFollowers,
  sseFrame,
  truncatedFrame,
} from '@ctxflow/session-runner';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';

const AT = Date.parse('2026-01-01T00:00:00Z');

let app: FastifyInstance | undefined;
afterEach(async () => {
  app?.server.closeAllConnections();
  await app?.close();
  app = undefined;
});

async function start(streams = new StreamFollowers()) {
  const engine = createEngine({ clock: { now: () => AT } });
  app = buildRunnerApp({ engine, authenticate: createAuthenticator(new Map()), streams });
  await app.ready();
  const a = app;
  const call = async (method: 'GET' | 'POST', url: string, payload?: object) => {
    const response = await a.inject({ method, url, ...(payload ? { payload } : {}) });
    expect(response.statusCode, response.body).toBeLessThan(300);
    return response;
  };
  const agentId = (await call('POST', '/agents', {})).json().agentId as string;
  const sessionId = (await call('POST', '/sessions', { agentId })).json().sessionId as string;
  const post = (content: string) => call('POST', `/sessions/${sessionId}/messages`, { role: 'user', content });
  return { app: a, call, sessionId, post, streams };
}

/** The events of a server-sent events text, each with its exact bytes. */
function frames(text: string): { event: string; data: any; bytes: number }[] {
  return text
    .split('\n\n')
    .filter((block) => block.trim())
    .map((block) => ({
      event: block.split('\n')[0]!.slice('event: '.length),
      data: JSON.parse(block.split('\n')[1]!.slice('data: '.length)),
      bytes: Buffer.byteLength(`${block}\n\n`),
    }));
}

describe('stream replay and followers are bounded', () => {
  it('the replay holds the newest chunks within 256 KiB after one exact replay_truncated event', async () => {
    expect(STREAM_REPLAY_BYTES).toBe(256 * 1024);
    const { call, sessionId, post } = await start();
    const MESSAGES = 60;
    for (let i = 0; i < MESSAGES; i++) await post(`${String(i).padStart(2, '0')}${'x'.repeat(9_998)}`);

    const { body } = await call('GET', `/sessions/${sessionId}/stream?follow=false`);
    const events = frames(body);
    const [summary, ...kept] = events;

    // What fits, computed on its own: every message frame here has one size (two-digit seqs, one clock).
    const frameBytes = Buffer.byteLength(sseFrame('message', kept.at(-1)!.data));
    let fits = 0;
    while ((fits + 1) * frameBytes + Buffer.byteLength(truncatedFrame(MESSAGES - fits - 1)) <= STREAM_REPLAY_BYTES) {
      fits += 1;
    }
    expect(fits).toBeGreaterThan(10);
    expect(fits).toBeLessThan(MESSAGES);

    expect(summary!.event).toBe('replay_truncated');
    expect(summary!.data).toEqual({ type: 'replay_truncated', omitted: MESSAGES - fits });
    expect(body.startsWith(truncatedFrame(MESSAGES - fits))).toBe(true);
    expect(kept.map((e) => e.event)).toEqual(Array(fits).fill('message'));
    // The newest, in order, complete.
    expect(kept.map((e) => e.data.content.slice(0, 2))).toEqual(
      Array.from({ length: fits }, (_, i) => String(MESSAGES - fits + i).padStart(2, '0')),
    );
    expect(kept.every((e) => e.data.content.length === 10_000)).toBe(true);
    expect(Buffer.byteLength(body)).toBeLessThanOrEqual(STREAM_REPLAY_BYTES);
    expect(Buffer.byteLength(body)).toBe(events.reduce((sum, e) => sum + e.bytes, 0));

    // Under the bound, the replay is whole and has no summary.
    const small = await start();
    for (let i = 0; i < 5; i++) await small.post(`short ${i}`);
    const whole = frames((await small.call('GET', `/sessions/${small.sessionId}/stream?follow=false`)).body);
    expect(whole.map((e) => [e.event, e.data.content])).toEqual(
      Array.from({ length: 5 }, (_, i) => ['message', `short ${i}`]),
    );
  });

  it('a follower that does not read is dropped (the server closes it) while a reading follower gets every message', async () => {
    expect(STREAM_BUFFER_BYTES).toBe(4 * 1024 * 1024);
    const dropped: object[] = [];
    const streams = new StreamFollowers(undefined, { warn: (fields) => dropped.push(fields) });
    const { app: server, sessionId, post } = await start(streams);
    await server.listen({ host: '127.0.0.1', port: 0 });
    const port = (server.server.address() as { port: number }).port;

    const open = async (reading: boolean) => {
      const socket: Socket = connect(port, '127.0.0.1');
      let received = 0;
      let messages = 0;
      let text = '';
      let tail = '';
      const marker = 'event: message';
      socket.on('data', (chunk: Buffer) => {
        received += chunk.length;
        const part = chunk.toString('latin1');
        // Events counted as they arrive (a marker may straddle two chunks); the reader keeps no text.
        const window = tail + part;
        for (let at = window.indexOf(marker); at >= 0; at = window.indexOf(marker, at + 1)) {
          if (at + marker.length > tail.length) messages += 1;
        }
        tail = window.slice(-(marker.length - 1));
        if (!reading || text.length < 4096) text += part;
      });
      socket.on('error', () => {});
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      socket.write(`GET /sessions/${sessionId}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
      while (!text.includes('\r\n\r\n')) await new Promise((r) => setTimeout(r, 10));
      // A client that never reads: nothing leaves the kernel's receive buffer.
      if (!reading) socket.pause();
      return { socket, closed, received: () => received, messages: () => messages, text: () => text };
    };
    const stalled = await open(false);
    const reader = await open(true);

    // 24 messages of 1 MB: 24 MB the server would otherwise hold for the stalled follower (the kernels take a few).
    const MESSAGES = 24;
    const SIZE = 1_000_000;
    for (let i = 0; i < MESSAGES; i++) {
      await post(`m${String(i).padStart(2, '0')}:${'y'.repeat(SIZE - 4)}`);
      // The reader keeps up: the next message goes out once it took this one.
      while (reader.messages() < i + 1) await new Promise((r) => setTimeout(r, 5));
    }

    expect(streams.dropped).toBe(1);
    expect(dropped).toEqual([
      expect.objectContaining({ sessionId, limitBytes: STREAM_BUFFER_BYTES, bufferedBytes: expect.any(Number) }),
    ]);
    // The stalled client now reads: it gets what the kernels held, then the server's close.
    stalled.socket.resume();
    await stalled.closed;
    process.stdout.write(
      `[stream limits] stalled follower: ${stalled.received()} bytes reached it of ${MESSAGES * SIZE} posted, then the server closed it\n`,
    );
    expect(stalled.received()).toBeLessThan((MESSAGES * SIZE) / 2);
    expect(stalled.text()).not.toContain(`m${MESSAGES - 1}:`);
    expect(stalled.text().endsWith('0\r\n\r\n')).toBe(false);

    // The reader was never dropped: every message arrived and its stream is still open.
    expect(reader.messages()).toBe(MESSAGES);
    expect(reader.socket.destroyed).toBe(false);
    expect(streams.size).toBe(1);
    reader.socket.destroy();
  }, 120_000);
});
