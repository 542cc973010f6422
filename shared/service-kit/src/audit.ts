import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';

/**
 * One change of who can see what: a log line `{ audit: true, tenant, subject, action, target,
 * outcome }` with the message `audit`. `subject` is `key:<key id>` (a prefix of the key's
 * SHA-256) or a token's `sub`, never a credential.
 */
export interface AuditEvent {
  tenant: string;
  subject: string;
  /** `agent.create`, `agent.erase`, `session.create`, `session.branch`, `session.erase`,
   * `subscription.create`, `subscription.remove`, `dead-letters.replay`, `api-keys.reload`. */
  action: string;
  /** What the action was on (an agent or session id, a subscription, a file path). */
  target: string;
  outcome: 'ok' | 'refused' | 'failed';
}

export interface AuditLog {
  record(event: AuditEvent): void;
}

/** Audit lines on the service's logger, at level info. */
export function createAuditLog(logger: Pick<FastifyBaseLogger, 'info'>): AuditLog {
  return {
    record(event) {
      logger.info(
        {
          audit: true,
          tenant: event.tenant,
          subject: event.subject,
          action: event.action,
          target: event.target,
          outcome: event.outcome,
        },
        'audit',
      );
    },
  };
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** This route's audit action: auditHook logs one line per request to it. */
    audit?: string;
  }
  interface FastifyRequest {
    /** Set by a handler: the audit line's target (default: the path's session or agent id) or action. */
    auditDetail: { target?: string; action?: string } | null;
  }
}

function outcomeOf(status: number): AuditEvent['outcome'] {
  if (status < 400) return 'ok';
  return status >= 500 ? 'failed' : 'refused';
}

/**
 * An onResponse hook for a secured scope: a request to a route declaring `config.audit` is
 * one audit line, whatever its answer (a refusal is outcome `refused`, a failure `failed`).
 * Register `request.auditDetail` with `app.decorateRequest('auditDetail', null)` once.
 */
export function auditHook(audit: AuditLog) {
  return (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
    const action = request.routeOptions.config.audit;
    if (action) {
      const params = (request.params ?? {}) as { sessionId?: string; agentId?: string };
      audit.record({
        tenant: request.identity?.tenant ?? '-',
        subject: request.identity?.subject ?? '-',
        action: request.auditDetail?.action ?? action,
        target: request.auditDetail?.target ?? params.sessionId ?? params.agentId ?? '-',
        outcome: outcomeOf(reply.statusCode),
      });
    }
    done();
  };
}
