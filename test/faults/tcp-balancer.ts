/**
 * A TCP balancer on loopback in front of several instances of one service, for
 * the fault tests, as a Kubernetes Service is in front of its pods: each new
 * connection goes to an instance picked at random; when that instance refuses
 * it (killed, not yet restarted), the next one is tried, and only when every
 * instance refuses is the client's connection closed. An open connection stays
 * with its instance and is cut when that instance dies.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export class TcpBalancer {
  readonly #server: Server;
  readonly #ports: readonly number[];
  readonly #sockets = new Set<Socket>();
  /** Connections accepted, those the first instance picked refused, and those every instance refused. */
  readonly counts = { connections: 0, failedOver: 0, refused: 0 };

  /** Listens on a free loopback port in front of the instances listening on `ports`. */
  static async start(ports: readonly number[]): Promise<TcpBalancer> {
    if (ports.length === 0) throw new Error('TcpBalancer needs at least one instance port');
    const server = createServer();
    const balancer = new TcpBalancer(server, ports);
    await new Promise<void>((done, fail) => {
      server.once('error', fail);
      server.listen(0, '127.0.0.1', () => done());
    });
    return balancer;
  }

  private constructor(server: Server, ports: readonly number[]) {
    this.#server = server;
    this.#ports = ports;
    server.on('connection', (client) => this.#accept(client));
  }

  /** The loopback port the balancer listens on. */
  get port(): number {
    const address = this.#server.address();
    return typeof address === 'object' && address ? address.port : 0;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    await new Promise<void>((r) => this.#server.close(() => r()));
  }

  #track(socket: Socket): void {
    this.#sockets.add(socket);
    socket.once('close', () => this.#sockets.delete(socket));
  }

  #accept(client: Socket): void {
    this.counts.connections += 1;
    this.#track(client);
    client.pause();
    client.on('error', () => client.destroy());
    // A random order of the instances (Fisher-Yates): the first that accepts takes the connection.
    const order = [...this.#ports];
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    const attempt = (i: number) => {
      if (client.destroyed) return;
      if (i >= order.length) {
        this.counts.refused += 1;
        client.destroy();
        return;
      }
      const upstream = connect(order[i]!, '127.0.0.1');
      this.#track(upstream);
      const refused = () => {
        if (i === 0) this.counts.failedOver += 1;
        attempt(i + 1);
      };
      upstream.once('error', refused);
      upstream.once('connect', () => {
        upstream.off('error', refused);
        upstream.on('error', () => upstream.destroy());
        upstream.once('close', () => client.destroy());
        client.once('close', () => upstream.destroy());
        upstream.setNoDelay(true);
        client.setNoDelay(true);
        client.pipe(upstream);
        upstream.pipe(client);
      });
    };
    attempt(0);
  }
}
