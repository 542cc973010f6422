/**
 * A TCP proxy on loopback between a service and its server (Redis, a Kafka
 * broker), for the fault tests. Modes, switchable at any time:
 *   - `pass`: bytes both ways as they come;
 *   - `delay`: every chunk, both ways, held `delayMs` (order kept);
 *   - `blackhole`: nothing forwarded either way and nothing closed: requests
 *     vanish, no answer ever comes (a partition); new connections are accepted
 *     and swallowed too;
 *   - `drop-responses`: requests reach the server and are served, its answers
 *     are thrown away and the client's connection is cut `cutAfterMs` later,
 *     so the client cannot tell whether its request ran.
 * `reset()` destroys every open connection (how a partition ends for the
 * connections it hung: they time out or are reset); clients reconnect.
 * An `observe` callback sees every chunk as it arrives, with its connection,
 * direction and the mode it met (a protocol-aware test counts requests with it).
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export type ProxyMode = 'pass' | 'delay' | 'blackhole' | 'drop-responses';

interface Pair {
  client: Socket;
  server: Socket;
}

/** One chunk as it reached the proxy: `up` from the client, `down` from the server. */
export interface ProxyChunk {
  /** Numbered from 1 per proxy, in accepting order. */
  connection: number;
  direction: 'up' | 'down';
  mode: ProxyMode;
  chunk: Buffer;
}

export class TcpProxy {
  readonly #server: Server;
  readonly #pairs = new Set<Pair>();
  #mode: ProxyMode = 'pass';
  #delayMs = 0;
  #cutAfterMs = 200;
  readonly #observe: ((chunk: ProxyChunk) => void) | undefined;
  /** Chunks forwarded, and thrown away, per direction. */
  readonly counts = { up: 0, down: 0, swallowedUp: 0, droppedDown: 0, cut: 0, connections: 0 };

  static async start(
    target: { host: string; port: number },
    options: { observe?: (chunk: ProxyChunk) => void } = {},
  ): Promise<TcpProxy> {
    const server = createServer();
    const proxy = new TcpProxy(server, target, options.observe);
    await new Promise<void>((done, fail) => {
      server.once('error', fail);
      server.listen(0, '127.0.0.1', () => done());
    });
    return proxy;
  }

  private constructor(
    server: Server,
    target: { host: string; port: number },
    observe: ((chunk: ProxyChunk) => void) | undefined,
  ) {
    this.#server = server;
    this.#observe = observe;
    server.on('connection', (client) => this.#accept(client, target));
  }

  /** The loopback port the proxy listens on. */
  get port(): number {
    const address = this.#server.address();
    return typeof address === 'object' && address ? address.port : 0;
  }

  get mode(): ProxyMode {
    return this.#mode;
  }

  setMode(mode: ProxyMode, options: { delayMs?: number; cutAfterMs?: number } = {}): void {
    this.#mode = mode;
    this.#delayMs = options.delayMs ?? this.#delayMs;
    this.#cutAfterMs = options.cutAfterMs ?? this.#cutAfterMs;
  }

  /** Destroys every open connection, both sides. */
  reset(): void {
    for (const pair of this.#pairs) {
      pair.client.destroy();
      pair.server.destroy();
    }
    this.#pairs.clear();
  }

  async close(): Promise<void> {
    this.reset();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }

  #accept(client: Socket, target: { host: string; port: number }): void {
    this.counts.connections += 1;
    const connection = this.counts.connections;
    const server = connect(target.port, target.host);
    const pair = { client, server };
    this.#pairs.add(pair);
    const end = () => {
      this.#pairs.delete(pair);
      client.destroy();
      server.destroy();
    };
    client.on('error', end);
    server.on('error', end);
    client.on('close', end);
    server.on('close', end);
    client.setNoDelay(true);
    server.setNoDelay(true);
    // Every chunk goes out through its direction's chain, so bytes keep their order across mode
    // switches (a chunk arriving in `pass` never overtakes one still held by `delay`).
    let upChain = Promise.resolve();
    let downChain = Promise.resolve();
    const hold = (ms: number) => (ms > 0 ? new Promise<void>((r) => setTimeout(r, ms)) : undefined);
    const forward = (chain: Promise<void>, write: () => void): Promise<void> => {
      const ms = this.#mode === 'delay' ? this.#delayMs : 0;
      return chain.then(() => hold(ms)).then(write);
    };

    client.on('data', (chunk: Buffer) => {
      this.#observe?.({ connection, direction: 'up', mode: this.#mode, chunk });
      if (this.#mode === 'blackhole') {
        this.counts.swallowedUp += 1;
        return;
      }
      this.counts.up += 1;
      upChain = forward(upChain, () => {
        if (!server.destroyed) server.write(chunk);
      });
    });
    let cutting = false;
    server.on('data', (chunk: Buffer) => {
      this.#observe?.({ connection, direction: 'down', mode: this.#mode, chunk });
      if (this.#mode === 'blackhole') {
        this.counts.droppedDown += 1;
        return;
      }
      if (this.#mode === 'drop-responses') {
        this.counts.droppedDown += 1;
        if (!cutting) {
          cutting = true;
          setTimeout(() => {
            this.counts.cut += 1;
            end();
          }, this.#cutAfterMs);
        }
        return;
      }
      this.counts.down += 1;
      downChain = forward(downChain, () => {
        if (!client.destroyed) client.write(chunk);
      });
    });
  }
}
