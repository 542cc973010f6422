/**
 * A session's data kept outside the session store: the ticket feed's batch stream,
 * cursor, marks and dedupe ids, and the session's subscriptions (step-context's
 * FeedStepContext implements it). Erasing a session erases these too.
 */
export interface SessionFeedData {
  /**
   * Erases everything of the session of `tenant`: afterwards no subscriber index names
   * it and no key of it is left; an update applied later writes nothing for it.
   * Nothing when there is none (idempotent, safe to retry after a failure).
   */
  eraseSession(sessionId: string, tenant: string): Promise<void>;
}
