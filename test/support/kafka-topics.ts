/**
 * Deletes a topic on a real broker and creates it again under the same name,
 * as an operator (or a Strimzi reconcile) would: a new topic id, offsets from 0,
 * the consumer groups' committed offsets of the old one gone.
 */
import { Admin } from '@platformatic/kafka';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** The topic's id as the broker reports it now (Metadata v10+), or undefined when it does not exist. */
export async function kafkaTopicId(brokers: string[], topic: string): Promise<string | undefined> {
  const admin = new Admin({ clientId: 'ctxflow-test-topics', bootstrapBrokers: brokers });
  try {
    if (!(await admin.listTopics()).includes(topic)) return undefined;
    return (await admin.metadata({ topics: [topic], forceUpdate: true })).topics.get(topic)?.id;
  } finally {
    await admin.close();
  }
}

/**
 * Deletes `topic` and creates it again with `partitions`; resolves once the new
 * topic (another id than before) has a leader for every partition, with its id.
 */
export async function recreateKafkaTopic(
  brokers: string[],
  topic: string,
  partitions: number,
  timeoutMs = 30_000,
): Promise<string> {
  const admin = new Admin({ clientId: 'ctxflow-test-topics', bootstrapBrokers: brokers });
  const deadline = Date.now() + timeoutMs;
  const fail = (what: string) => {
    throw new Error(`recreating ${topic}: ${what} within ${timeoutMs} ms`);
  };
  try {
    const before = (await admin.metadata({ topics: [topic], forceUpdate: true })).topics.get(topic)?.id;
    await admin.deleteTopics({ topics: [topic] });
    // Deletion completes in the background: the name is free once it is no longer listed.
    while ((await admin.listTopics()).includes(topic)) {
      if (Date.now() > deadline) fail('the deletion did not complete');
      await sleep(100);
    }
    for (;;) {
      try {
        await admin.createTopics({ topics: [topic], partitions, replicas: 1 });
        break;
      } catch (err) {
        // A deletion the controller has not finished answers "already exists" for a moment.
        if (Date.now() > deadline) throw err;
        await sleep(200);
      }
    }
    for (;;) {
      try {
        const described = (await admin.metadata({ topics: [topic], forceUpdate: true })).topics.get(topic);
        if (
          described !== undefined &&
          described.id !== before &&
          described.partitions.length === partitions &&
          described.partitions.every((p) => p.leader >= 0)
        ) {
          return described.id;
        }
      } catch {
        // Not known to the broker that answered yet.
      }
      if (Date.now() > deadline) fail('the new topic got no leader');
      await sleep(100);
    }
  } finally {
    await admin.close();
  }
}
