/**
 * A private Kafka for one fault test: one KRaft node, or a cluster of nodes,
 * on free loopback ports, from the same Maven jars as scripts/infra.ts, with
 * its data under .infra/faults/<name>/ (removed by stop()). Never the shared
 * broker: a test may kill -9 any node of it and start it again.
 *
 * With `proxied`, each node has a second client listener behind its own TCP
 * proxy (test/faults/tcp-proxy.ts) and advertises the proxy's port there:
 * clients bootstrapped on `proxiedBrokers` reach the broker only through the
 * proxies, for every request, while `brokers` (the test's own view) and the
 * nodes' own traffic stay direct. `requests` counts the Kafka requests that
 * went into the proxies, by the proxy mode they met.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  formatKafkaNodeStorage,
  INFRA_DIR,
  kafkaNodeCommand,
  kafkaNodeProperties,
  newKafkaClusterId,
} from '../../scripts/infra.ts';
import { freePort, sleep, waitFor } from './processes.ts';
import { type ProxyChunk, type ProxyMode, TcpProxy } from './tcp-proxy.ts';

interface Node {
  id: number;
  port: number;
  controllerPort: number;
  dir: string;
  propertiesFile: string;
  logFile: string;
  child: ChildProcess | undefined;
  /** With `proxied`: the proxied listener's own port, and the proxy in front of it. */
  proxied?: { port: number; proxy: TcpProxy };
  /** More client listeners, each on its own port. */
  listeners: { name: string; protocol: string; port: number }[];
}

/** Names of the Kafka requests (by API key) that producers, consumer groups and admins send. */
const API_NAMES: Readonly<Record<number, string>> = {
  0: 'Produce',
  1: 'Fetch',
  2: 'ListOffsets',
  3: 'Metadata',
  8: 'OffsetCommit',
  9: 'OffsetFetch',
  10: 'FindCoordinator',
  11: 'JoinGroup',
  12: 'Heartbeat',
  13: 'LeaveGroup',
  14: 'SyncGroup',
  18: 'ApiVersions',
  19: 'CreateTopics',
  22: 'InitProducerId',
  32: 'DescribeConfigs',
  60: 'DescribeCluster',
};

/**
 * Counts Kafka requests in the client-to-broker bytes of the proxies: every
 * request is a 4-byte size and a header starting with its 2-byte API key. A
 * request is counted under the mode the proxy was in when its last byte
 * arrived: under `blackhole` it was swallowed, under `drop-responses` the
 * broker served it and its answer was thrown away.
 */
export class KafkaRequests {
  readonly #partial = new Map<string, Buffer>();
  readonly #counts = new Map<ProxyMode, Map<string, number>>();
  readonly #waiters: { name: string; run: () => ProxyMode }[] = [];

  observe(proxy: number, { connection, direction, mode, chunk }: ProxyChunk): void {
    if (direction !== 'up') return;
    const key = `${proxy}/${connection}`;
    const held = this.#partial.get(key);
    let buffer = held ? Buffer.concat([held, chunk]) : chunk;
    while (buffer.length >= 6 && buffer.length >= 4 + buffer.readInt32BE(0)) {
      const api = buffer.readInt16BE(4);
      const name = API_NAMES[api] ?? `api${api}`;
      const waiter = this.#waiters.findIndex((w) => w.name === name);
      // Before the proxy handles the chunk: a mode the waiter sets applies to this request and its answer.
      if (waiter >= 0) mode = this.#waiters.splice(waiter, 1)[0]!.run();
      const byName = this.#counts.get(mode) ?? new Map<string, number>();
      byName.set(name, (byName.get(name) ?? 0) + 1);
      this.#counts.set(mode, byName);
      buffer = buffer.subarray(4 + buffer.readInt32BE(0));
    }
    if (buffer.length > 0) this.#partial.set(key, Buffer.from(buffer));
    else this.#partial.delete(key);
  }

  /**
   * Runs `then` the moment the next request named `name` has fully reached a
   * proxy, before the proxy passes it on, so a mode `then` sets applies to
   * that request and to its answer; the request counts under the mode `then`
   * returns. Resolves true then, or false after `timeoutMs` without one (and
   * `then` is not run).
   */
  whenNext(name: string, timeoutMs: number, then: () => ProxyMode): Promise<boolean> {
    return new Promise((resolve) => {
      const waiter = {
        name,
        run: () => {
          clearTimeout(timer);
          resolve(true);
          return then();
        },
      };
      const timer = setTimeout(() => {
        const at = this.#waiters.indexOf(waiter);
        if (at >= 0) this.#waiters.splice(at, 1);
        resolve(false);
      }, timeoutMs);
      this.#waiters.push(waiter);
    });
  }

  /** Requests named `name` (all, without one) that met `mode`. */
  count(mode: ProxyMode, name?: string): number {
    const byName = this.#counts.get(mode);
    if (!byName) return 0;
    if (name !== undefined) return byName.get(name) ?? 0;
    let n = 0;
    for (const count of byName.values()) n += count;
    return n;
  }

  /** Every count, by mode and then request name. */
  toJSON(): Record<string, Record<string, number>> {
    return Object.fromEntries([...this.#counts].map(([mode, byName]) => [mode, Object.fromEntries(byName)]));
  }
}

/** What PrivateKafka.start takes. */
export type PrivateKafkaOptions = {
  name: string;
  nodes?: number;
  replicationFactor?: number;
  minInsyncReplicas?: number;
  proxied?: boolean;
  /** More client listeners on free ports (their settings in `extra`); `listenerPorts` tells their ports. */
  listeners?: readonly { name: string; protocol: string }[];
  /** More server.properties lines. */
  extra?: readonly string[];
  /** More arguments of the storage format (e.g. `--add-scram`). */
  formatArgs?: readonly string[];
  /** How long each node may take to start (default 60 s). */
  startTimeoutMs?: number;
};

/** A node's log when it could not bind one of its ports. */
const PORT_TAKEN = /Address already in use|BindException|Unable to start acceptor/;

export class PrivateKafka {
  readonly dir: string;
  readonly #nodes: Node[];
  #command: (propertiesFile: string) => Promise<string[]>;
  /** Requests through the proxies (with `proxied`), by the mode they met. */
  readonly requests = new KafkaRequests();

  /**
   * Formats and starts `nodes` KRaft nodes (each broker and controller); with
   * more than one, topics get `replicationFactor` replicas and acks=all writes
   * need `minInsyncReplicas` of them. With `proxied`, each node also gets a
   * client listener behind a TCP proxy (`proxies`, `proxiedBrokers`).
   *
   * Ports are picked free, then bound by the nodes seconds later: another
   * process on the host may take one in between. A start that fails so (a node
   * cannot bind its port) is tried again on new ports, twice at most. A start
   * that fails leaves no node running and no data behind.
   */
  static async start(options: PrivateKafkaOptions): Promise<PrivateKafka> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await PrivateKafka.#startOnce(options);
      } catch (err) {
        if (attempt >= 3 || !PORT_TAKEN.test(String(err))) throw err;
      }
    }
  }

  static async #startOnce(options: PrivateKafkaOptions): Promise<PrivateKafka> {
    const count = options.nodes ?? 1;
    const dir = join(INFRA_DIR, 'faults', options.name);
    rmSync(dir, { recursive: true, force: true });
    const nodes: Node[] = [];
    for (let i = 1; i <= count; i++) {
      const nodeDir = join(dir, `node-${i}`);
      mkdirSync(nodeDir, { recursive: true });
      nodes.push({
        id: i,
        port: await freePort(),
        controllerPort: await freePort(),
        dir: nodeDir,
        propertiesFile: join(nodeDir, 'server.properties'),
        logFile: join(nodeDir, 'server.log'),
        child: undefined,
        listeners: await Promise.all((options.listeners ?? []).map(async (l) => ({ ...l, port: await freePort() }))),
      });
    }
    const voters = nodes.map((n) => `${n.id}@127.0.0.1:${n.controllerPort}`).join(',');
    const clusterId = newKafkaClusterId();
    // A small heap each: a cluster of three shares the machine with the services.
    const heap = count > 1 ? '384m' : '512m';
    // Quick JVM start (C1 only): a test restarts nodes and waits for them.
    const kafka = new PrivateKafka(dir, nodes, (file) => kafkaNodeCommand(file, heap, ['-XX:TieredStopAtLevel=1']));
    if (options.proxied) {
      for (const node of nodes) {
        const port = await freePort();
        const proxy = await TcpProxy.start(
          { host: '127.0.0.1', port },
          { observe: (chunk) => kafka.requests.observe(node.id, chunk) },
        );
        node.proxied = { port, proxy };
      }
    }
    await Promise.all(
      nodes.map(async (node) => {
        writeFileSync(
          node.propertiesFile,
          kafkaNodeProperties({
            nodeId: node.id,
            port: node.port,
            controllerPort: node.controllerPort,
            voters,
            dataDir: join(node.dir, 'data'),
            replicationFactor: options.replicationFactor ?? 1,
            minInsyncReplicas: options.minInsyncReplicas ?? 1,
            ...(node.proxied
              ? { proxiedListener: { port: node.proxied.port, advertisedPort: node.proxied.proxy.port } }
              : {}),
            listeners: node.listeners,
            // A node killed and restarted registers again: let the controller give up its old session soon.
            extra: ['broker.session.timeout.ms=3000', 'broker.heartbeat.interval.ms=500', ...(options.extra ?? [])],
          }),
        );
        await formatKafkaNodeStorage(node.propertiesFile, clusterId, options.formatArgs);
      }),
    );
    const started = await Promise.allSettled(nodes.map((node) => kafka.startNode(node.id, options.startTimeoutMs)));
    const failed = started.find((r) => r.status === 'rejected');
    if (failed) {
      await kafka.stop();
      throw failed.reason;
    }
    return kafka;
  }

  private constructor(dir: string, nodes: Node[], command: (propertiesFile: string) => Promise<string[]>) {
    this.dir = dir;
    this.#nodes = nodes;
    this.#command = command;
  }

  /** The bootstrap list, every node. */
  get brokers(): string[] {
    return this.#nodes.map((n) => `127.0.0.1:${n.port}`);
  }

  /** The bootstrap list of the extra listener `name`, every node. */
  listenerBrokers(name: string): string[] {
    return this.#nodes.flatMap((n) => n.listeners.filter((l) => l.name === name).map((l) => `127.0.0.1:${l.port}`));
  }

  /** The bootstrap list through the proxies, every node (empty without `proxied`). */
  get proxiedBrokers(): string[] {
    return this.#nodes.flatMap((n) => (n.proxied ? [`127.0.0.1:${n.proxied.proxy.port}`] : []));
  }

  /** The proxy in front of each node's proxied listener, in node order (empty without `proxied`). */
  get proxies(): TcpProxy[] {
    return this.#nodes.flatMap((n) => (n.proxied ? [n.proxied.proxy] : []));
  }

  get nodeIds(): number[] {
    return this.#nodes.map((n) => n.id);
  }

  #node(id: number): Node {
    const node = this.#nodes.find((n) => n.id === id);
    if (!node) throw new Error(`no Kafka node ${id}`);
    return node;
  }

  /** Starts node `id` (again: same ports, same data) and waits until it says it started and accepts connections. */
  async startNode(id: number, timeoutMs = 60_000): Promise<void> {
    const node = this.#node(id);
    const out = openSync(node.logFile, 'w');
    const child = spawn('java', await this.#command(node.propertiesFile), {
      cwd: node.dir,
      stdio: ['ignore', out, out],
    });
    closeSync(out);
    node.child = child;
    // A node that exits while starting ends the wait at once, with its log.
    const outcome = await waitFor(
      `Kafka node ${id} on ${node.port}`,
      () => {
        if (child.exitCode !== null || child.signalCode !== null) return 'exited';
        return existsSync(node.logFile) && readFileSync(node.logFile, 'utf8').includes('Kafka Server started');
      },
      timeoutMs,
      100,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; its log ends:\n${this.tail(id, 10)}`);
    });
    if (outcome === 'exited') throw new Error(`Kafka node ${id} exited: ${this.tail(id)}`);
  }

  /** kill -9 of node `id`: no controlled shutdown, its log segments as they were. */
  async kill9(id: number): Promise<void> {
    const child = this.#node(id).child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
  }

  /** Lines of node `id`'s log (since its last start) that match `pattern`. */
  logLines(id: number, pattern: RegExp): string[] {
    try {
      return readFileSync(this.#node(id).logFile, 'utf8')
        .split('\n')
        .filter((line) => pattern.test(line));
    } catch {
      return [];
    }
  }

  tail(id: number, lines = 30): string {
    try {
      return readFileSync(this.#node(id).logFile, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }

  /**
   * Copies each node's log (since its last start) to `<dir>/kafka-node-<id>.log`, before stop()
   * removes them: the group coordinator's joins, rebalances and expired members are there.
   * Returns the paths written.
   */
  keepLogs(dir: string): string[] {
    mkdirSync(dir, { recursive: true });
    return this.#nodes.flatMap((node) => {
      if (!existsSync(node.logFile)) return [];
      const file = join(dir, `kafka-node-${node.id}.log`);
      copyFileSync(node.logFile, file);
      return [file];
    });
  }

  /** Closes the proxies, kill -9 of every node, then removes the data. */
  async stop(): Promise<void> {
    await Promise.all(this.proxies.map((p) => p.close()));
    await Promise.all(this.#nodes.map((n) => this.kill9(n.id)));
    await sleep(100);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
