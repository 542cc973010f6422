/**
 * A session's data kept outside the session store: its ticket-feed subscriptions,
 * each with the feed position it started at (the subscription store of
 * @ctxflow/subscriptions holds them; the feed streams themselves are shared
 * and hold nothing of a session). Erasing a session erases these too.
 */
export interface SessionFeedData {
  /**
   * Erases everything of the session of `tenant`: afterwards no stream's followers name
   * it and no key of it is left; an update applied later writes nothing for it.
   * Nothing when there is none (idempotent, safe to retry after a failure).
   */
  eraseSession(sessionId: string, tenant: string): Promise<void>;
}
