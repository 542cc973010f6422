/** Kafka topic names. Keys: ticket updates by `${source}:${ticket}`, steps by session id. */
export const TOPICS = {
  ticketUpdates: 'ctxflow.ticket-updates.v1',
  stepRequests: 'ctxflow.step-requests.v1',
  stepResults: 'ctxflow.step-results.v1',
} as const;

export type TopicName = (typeof TOPICS)[keyof typeof TOPICS];
