/**
 * Who owns a session. The composition root wires it to the session-runner's
 * store, so that subscriptions of an unknown session, or of a session of
 * another tenant, are refused with 404 `state_session_not_found`.
 */
export interface SessionDirectory {
  /** The tenant that owns `sessionId`, or undefined when no such session exists. */
  tenantOf(sessionId: string): Promise<string | undefined>;
}
