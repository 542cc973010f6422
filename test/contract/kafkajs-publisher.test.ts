/**
 * The kafkajs publisher sends one batch at a time: publish calls made while a
 * send is in flight wait and go out together in the next `sendBatch`, each
 * settled with that send's outcome; after a failed send (or connect) the next
 * send runs on a fresh producer. First on a scripted producer, then on the
 * shared broker with many concurrent calls.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingRecord, OutgoingRecord } from '@ctxflow/bus';
import { createKafkajsBus } from '@ctxflow/bus';
import type { Kafka, Producer, ProducerBatch, ProducerConfig } from 'kafkajs';
import kafkajs from 'kafkajs';
import { describe, expect, it, onTestFinished } from 'vitest';
import { KafkajsPublisher } from '../../shared/bus/src/kafkajs-publisher.ts';
import { requireKafka } from '../support/services.ts';

interface Deferred {
  resolve(): void;
  reject(err: unknown): void;
}

/** A producer whose connect and sendBatch settle when the test says. */
class ScriptedProducer {
  readonly batches: ProducerBatch[] = [];
  readonly sends: Deferred[] = [];
  connects = 0;
  disconnects = 0;
  connectFails: Error | undefined;
  readonly config: ProducerConfig | undefined;
  readonly kafka: ScriptedKafka;

  constructor(config: ProducerConfig | undefined, kafka: ScriptedKafka) {
    this.config = config;
    this.kafka = kafka;
  }

  async connect(): Promise<void> {
    this.connects++;
    await Promise.resolve();
    if (this.connectFails !== undefined) throw this.connectFails;
  }

  async disconnect(): Promise<void> {
    this.disconnects++;
  }

  sendBatch(batch: ProducerBatch): Promise<[]> {
    this.batches.push(batch);
    this.kafka.inFlight++;
    this.kafka.maxInFlight = Math.max(this.kafka.maxInFlight, this.kafka.inFlight);
    return new Promise<[]>((resolve, reject) => {
      this.sends.push({ resolve: () => resolve([]), reject });
    }).finally(() => {
      this.kafka.inFlight--;
    });
  }
}

class ScriptedKafka {
  readonly producers: ScriptedProducer[] = [];
  inFlight = 0;
  maxInFlight = 0;
  /** Set before a producer is made: its connect rejects with this. */
  nextConnectFails: Error | undefined;

  producer(config?: ProducerConfig): Producer {
    const producer = new ScriptedProducer(config, this);
    producer.connectFails = this.nextConnectFails;
    this.nextConnectFails = undefined;
    this.producers.push(producer);
    return producer as unknown as Producer;
  }

  get batches(): ProducerBatch[] {
    return this.producers.flatMap((p) => p.batches);
  }

  /** Settles the only send in flight. */
  settle(outcome: 'ok' | Error): void {
    const open = this.producers.flatMap((p) => p.sends.splice(0));
    expect(open).toHaveLength(1);
    const [send] = open;
    if (outcome === 'ok') send?.resolve();
    else send?.reject(outcome);
  }
}

/** Lets every pending promise callback and timer of this turn run. */
const settled = () => new Promise((resolve) => setImmediate(resolve));

/** Where a call stands: resolved, or the code of its rejection. */
function track(call: Promise<void>): { state: string; error?: unknown } {
  const status: { state: string; error?: unknown } = { state: 'pending' };
  call.then(
    () => {
      status.state = 'resolved';
    },
    (err: unknown) => {
      status.state = (err as { code?: string }).code ?? 'rejected';
      status.error = err;
    },
  );
  return status;
}

const rec = (value: string, key = value): OutgoingRecord => ({ key, value });
const sent = (batch: ProducerBatch | undefined) =>
  batch?.topicMessages?.map((t) => ({ topic: t.topic, values: t.messages.map((m) => m.value) }));

describe('kafkajs publisher: one send at a time (scripted producer)', () => {
  it('calls made while a send is in flight go out together in the next send, one entry per topic in call order', async () => {
    const kafka = new ScriptedKafka();
    const publisher = new KafkajsPublisher(kafka as unknown as Kafka, { retries: 3 });
    const first = track(publisher.publish('a', [rec('a1')]));
    await settled();
    expect(kafka.batches.map(sent)).toEqual([[{ topic: 'a', values: ['a1'] }]]);

    const queued = [
      track(publisher.publish('a', [rec('a2')])),
      track(publisher.publish('b', [rec('b1'), rec('b2')])),
      track(publisher.publish('a', [rec('a3'), rec('a4')])),
    ];
    await settled();
    expect(kafka.batches).toHaveLength(1);
    expect(queued.map((q) => q.state)).toEqual(['pending', 'pending', 'pending']);

    kafka.settle('ok');
    await settled();
    expect(first.state).toBe('resolved');
    expect(kafka.batches).toHaveLength(2);
    expect(sent(kafka.batches[1])).toEqual([
      { topic: 'a', values: ['a2', 'a3', 'a4'] },
      { topic: 'b', values: ['b1', 'b2'] },
    ]);
    expect(queued.map((q) => q.state)).toEqual(['pending', 'pending', 'pending']);

    kafka.settle('ok');
    await settled();
    expect(queued.map((q) => q.state)).toEqual(['resolved', 'resolved', 'resolved']);
    expect(kafka.batches.map((b) => b.acks)).toEqual([-1, -1]);
    expect(kafka.maxInFlight).toBe(1);
    expect(kafka.producers).toHaveLength(1);
    expect(kafka.producers[0]?.config).toMatchObject({
      idempotent: true,
      maxInFlightRequests: 1,
      retry: { retries: 3 },
    });
    expect(kafka.producers[0]?.connects).toBe(1);
  });

  it('a failed send rejects its calls with bus_unavailable and the next send runs on a fresh producer', async () => {
    const kafka = new ScriptedKafka();
    const publisher = new KafkajsPublisher(kafka as unknown as Kafka, { retries: 3 });
    const first = track(publisher.publish('t', [rec('1')]));
    await settled();
    const second = track(publisher.publish('t', [rec('2')]));
    const third = track(publisher.publish('t', [rec('3')]));
    await settled();

    kafka.settle(new Error('Connection closed'));
    await settled();
    expect(first.state).toBe('bus_unavailable');
    expect((first.error as Error).cause).toMatchObject({ message: 'Connection closed' });
    expect(kafka.producers).toHaveLength(2);
    expect(kafka.producers[0]?.disconnects).toBe(1);
    expect(kafka.producers[1]?.batches.map(sent)).toEqual([[{ topic: 't', values: ['2', '3'] }]]);

    kafka.settle('ok');
    await settled();
    expect([second.state, third.state]).toEqual(['resolved', 'resolved']);
    const fourth = track(publisher.publish('t', [rec('4')]));
    await settled();
    kafka.settle('ok');
    await settled();
    expect(fourth.state).toBe('resolved');
    // A send that succeeded keeps its producer.
    expect(kafka.producers).toHaveLength(2);
    expect(kafka.producers[1]?.batches).toHaveLength(2);
    expect(kafka.maxInFlight).toBe(1);
  });

  it('a failed connect rejects the waiting calls; the next call connects a fresh producer', async () => {
    const kafka = new ScriptedKafka();
    kafka.nextConnectFails = new Error('ECONNREFUSED');
    const publisher = new KafkajsPublisher(kafka as unknown as Kafka, { retries: 3 });
    const calls = [track(publisher.publish('t', [rec('1')])), track(publisher.publish('t', [rec('2')]))];
    await settled();
    expect(calls.map((c) => c.state)).toEqual(['bus_unavailable', 'bus_unavailable']);
    expect(kafka.batches).toEqual([]);
    expect(kafka.producers[0]?.disconnects).toBe(1);

    const next = track(publisher.publish('t', [rec('3')]));
    await settled();
    kafka.settle('ok');
    await settled();
    expect(next.state).toBe('resolved');
    expect(kafka.producers).toHaveLength(2);
    expect(kafka.producers[1]?.batches.map(sent)).toEqual([[{ topic: 't', values: ['3'] }]]);
  });

  it('a call made as the last send resolves (from its caller’s continuation) is sent too', async () => {
    const kafka = new ScriptedKafka();
    const publisher = new KafkajsPublisher(kafka as unknown as Kafka, { retries: 3 });
    const chained = track(publisher.publish('t', [rec('1')]).then(() => publisher.publish('t', [rec('2')])));
    await settled();
    kafka.settle('ok');
    await settled();
    expect(kafka.batches.map(sent)).toEqual([[{ topic: 't', values: ['1'] }], [{ topic: 't', values: ['2'] }]]);
    kafka.settle('ok');
    await settled();
    expect(chained.state).toBe('resolved');
  });

  it('a coalesced send carries whole calls up to 256 Ki characters; a larger call goes alone', async () => {
    const kafka = new ScriptedKafka();
    const publisher = new KafkajsPublisher(kafka as unknown as Kafka, { retries: 3 });
    const big = (name: string, chars: number) => rec(name.padEnd(chars, '.'), name);
    const calls = [
      track(publisher.publish('t', [rec('head')])),
      track(publisher.publish('t', [big('x1', 100_000)])),
      track(publisher.publish('t', [big('x2', 100_000)])),
      track(publisher.publish('t', [big('x3', 100_000)])),
      track(publisher.publish('t', [big('huge', 300_000)])),
      track(publisher.publish('t', [rec('tail')])),
    ];
    for (let i = 0; i < 4; i++) {
      await settled();
      kafka.settle('ok');
    }
    await settled();
    expect(calls.map((c) => c.state)).toEqual(Array(6).fill('resolved'));
    expect(kafka.batches.map((b) => b.topicMessages?.[0]?.messages.map((m) => m.key))).toEqual([
      // Connecting: every call so far was queued before the first send, which takes all that fit.
      ['head', 'x1', 'x2'],
      ['x3'],
      ['huge'],
      ['tail'],
    ]);
    expect(kafka.maxInFlight).toBe(1);
  });

  it('close() lets queued calls finish, then disconnects; a later call connects again', async () => {
    const kafka = new ScriptedKafka();
    const publisher = new KafkajsPublisher(kafka as unknown as Kafka, { retries: 3 });
    const calls = [track(publisher.publish('t', [rec('1')]))];
    await settled();
    calls.push(track(publisher.publish('t', [rec('2')])));
    const closed = track(publisher.close());
    await settled();
    expect(closed.state).toBe('pending');
    kafka.settle('ok');
    await settled();
    kafka.settle('ok');
    await settled();
    expect(calls.map((c) => c.state)).toEqual(['resolved', 'resolved']);
    expect(closed.state).toBe('resolved');
    expect(kafka.producers[0]?.disconnects).toBe(1);

    const after = track(publisher.publish('t', [rec('3')]));
    await settled();
    kafka.settle('ok');
    await settled();
    expect(after.state).toBe('resolved');
    expect(kafka.producers).toHaveLength(2);
  });
});

describe('kafkajs publisher: one send at a time (shared broker)', () => {
  it('concurrent publish calls: at most one send in flight, fewer sends than calls, every record on the topic once', async () => {
    const brokers = requireKafka();
    const topic = `ctxflow-test.kafkajs-publisher.${randomUUID().slice(0, 8)}`;
    const bus = createKafkajsBus({
      brokers,
      clientId: `ctxflow-test-${randomUUID().slice(0, 8)}`,
      sessionTimeoutMs: 10_000,
      heartbeatIntervalMs: 500,
      rebalanceTimeoutMs: 10_000,
      maxWaitMs: 200,
      retryBackoffMs: 50,
      retries: 3,
    });
    const kafka = new kafkajs.Kafka({
      clientId: `ctxflow-test-${randomUUID().slice(0, 8)}`,
      brokers,
      logLevel: kafkajs.logLevel.NOTHING,
    });
    // The real producer, with its sends counted.
    let inFlight = 0;
    let maxInFlight = 0;
    let sends = 0;
    const counting: Pick<Kafka, 'producer'> = {
      producer: (config) => {
        const producer = kafka.producer(config);
        const sendBatch = producer.sendBatch.bind(producer);
        producer.sendBatch = async (batch) => {
          sends++;
          maxInFlight = Math.max(maxInFlight, ++inFlight);
          try {
            return await sendBatch(batch);
          } finally {
            inFlight--;
          }
        };
        return producer;
      },
    };
    const publisher = new KafkajsPublisher(counting, { retries: 3 });
    const seen: IncomingRecord[] = [];
    onTestFinished(async () => {
      await Promise.allSettled([publisher.close(), bus.admin.close()]);
      const admin = kafka.admin();
      await admin.connect();
      await admin.deleteTopics({ topics: [topic] }).finally(() => admin.disconnect());
    });
    await bus.admin.ensureTopics([{ name: topic, partitions: 3 }]);

    // Connected first, so the waves below meet a send in flight.
    await publisher.publish(topic, [rec('warm-up', 'key-0')]);
    const keys = 12;
    const calls = 200;
    const values: string[] = [];
    const waves: Promise<void>[] = [];
    // Waves of 10 a turn apart: most arrive while a send is in flight.
    for (let wave = 0; wave < calls / 10; wave++) {
      for (let i = 0; i < 10; i++) {
        const n = wave * 10 + i;
        const records = Array.from({ length: 1 + (n % 3) }, (_, j) => rec(`${n}.${j}`, `key-${n % keys}`));
        values.push(...records.map((r) => r.value));
        waves.push(publisher.publish(topic, records));
      }
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(waves);
    process.stdout.write(`[kafkajs-publisher] ${calls} concurrent publish calls in ${sends - 1} sends\n`);
    expect(maxInFlight).toBe(1);
    expect(sends).toBeGreaterThan(1);
    expect(sends).toBeLessThan(calls + 1);

    const subscription = await bus.subscriber.subscribe({
      topic,
      groupId: `ctxflow-test-${randomUUID().slice(0, 8)}`,
      handle: async (records) => {
        seen.push(...records);
      },
    });
    onTestFinished(() => subscription.close());
    const deadline = Date.now() + 20_000;
    while (seen.length < values.length + 1 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    const onTopic = seen.map((r) => r.value).filter((v) => v !== 'warm-up');
    expect(onTopic.toSorted()).toEqual(values.toSorted());
    // Per key, in call order.
    for (let k = 0; k < keys; k++) {
      const ofKey = seen.filter((r) => r.key === `key-${k}` && r.value !== 'warm-up').map((r) => r.value);
      expect(ofKey).toEqual(values.filter((v) => Number(v.split('.')[0]) % keys === k));
    }
  }, 60_000);
});
