/**
 * A private Kafka for one fault test: one KRaft node, or a cluster of nodes,
 * on free loopback ports, from the same Maven jars as scripts/infra.ts, with
 * its data under .infra/faults/<name>/ (removed by stop()). Never the shared
 * broker: a test may kill -9 any node of it and start it again.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  formatKafkaNodeStorage,
  INFRA_DIR,
  kafkaNodeCommand,
  kafkaNodeProperties,
  newKafkaClusterId,
} from '../../scripts/infra.ts';
import { freePort, sleep, waitFor } from './processes.ts';

interface Node {
  id: number;
  port: number;
  controllerPort: number;
  dir: string;
  propertiesFile: string;
  logFile: string;
  child: ChildProcess | undefined;
}

export class PrivateKafka {
  readonly dir: string;
  readonly #nodes: Node[];
  #command: (propertiesFile: string) => Promise<string[]>;

  /**
   * Formats and starts `nodes` KRaft nodes (each broker and controller); with
   * more than one, topics get `replicationFactor` replicas and acks=all writes
   * need `minInsyncReplicas` of them.
   */
  static async start(options: {
    name: string;
    nodes?: number;
    replicationFactor?: number;
    minInsyncReplicas?: number;
  }): Promise<PrivateKafka> {
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
      });
    }
    const voters = nodes.map((n) => `${n.id}@127.0.0.1:${n.controllerPort}`).join(',');
    const clusterId = newKafkaClusterId();
    // A small heap each: a cluster of three shares the machine with the services.
    const heap = count > 1 ? '384m' : '512m';
    // Quick JVM start (C1 only): a test restarts nodes and waits for them.
    const kafka = new PrivateKafka(dir, nodes, (file) => kafkaNodeCommand(file, heap, ['-XX:TieredStopAtLevel=1']));
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
            // A node killed and restarted registers again: let the controller give up its old session soon.
            extra: ['broker.session.timeout.ms=3000', 'broker.heartbeat.interval.ms=500'],
          }),
        );
        await formatKafkaNodeStorage(node.propertiesFile, clusterId);
      }),
    );
    await Promise.all(nodes.map((node) => kafka.startNode(node.id)));
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
    await waitFor(
      `Kafka node ${id} on ${node.port}`,
      async () => {
        if (child.exitCode !== null) throw new Error(`Kafka node ${id} exited: ${this.tail(id)}`);
        const text = existsSync(node.logFile) ? readFileSync(node.logFile, 'utf8') : '';
        return text.includes('Kafka Server started');
      },
      timeoutMs,
      100,
    );
  }

  /** kill -9 of node `id`: no controlled shutdown, its log segments as they were. */
  async kill9(id: number): Promise<void> {
    const child = this.#node(id).child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
  }

  tail(id: number, lines = 30): string {
    try {
      return readFileSync(this.#node(id).logFile, 'utf8').split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  }

  /** kill -9 of every node, then removes the data. */
  async stop(): Promise<void> {
    await Promise.all(this.#nodes.map((n) => this.kill9(n.id)));
    await sleep(100);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
