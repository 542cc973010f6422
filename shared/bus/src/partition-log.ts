/** Kafka's "no topic id" (Uuid.ZERO_UUID), as @platformatic/kafka spells it. */
const ZERO_TOPIC_ID = '00000000-0000-0000-0000-000000000000';

/**
 * A topic id as @platformatic/kafka reports it in metadata, or undefined when
 * the broker gave none: before Metadata v10 the client puts the topic's name
 * in its place, and a broker may answer the zero UUID.
 */
export function reportedTopicId(topic: string, id: string | undefined): string | undefined {
  if (id === undefined || id === '' || id === topic || id === ZERO_TOPIC_ID) return undefined;
  return id;
}
