import { CtxflowError } from '@ctxflow/contracts';
import { loadLuaScript } from '@ctxflow/service-kit';
import type { Cluster, Redis } from 'ioredis';

/**
 * Who owns a session. The composition root wires it to the session-runner's
 * records, so that subscriptions of an unknown session, or of a session of
 * another tenant, are refused with 404 `state_session_not_found`.
 */
export interface SessionDirectory {
  /** The tenant that owns `sessionId`, or undefined when no such session exists. */
  tenantOf(sessionId: string): Promise<string | undefined>;
}

/**
 * The key of a session's record in the session-runner's Redis store: a JSON
 * string (the runner's SessionMeta) whose `tenant` field is the session's
 * owner; its presence is the session's existence, and it expires with the
 * session. The runner's store keys (services/session-runner/src/adapters/redis/keys.ts)
 * build it here, and step-context reads the owner from it: the one layout both share.
 * `prefix` is CTXFLOW_REDIS_PREFIX; it must not contain braces (the session id is the hash tag).
 */
export function sessionRecordKey(prefix: string, sessionId: string): string {
  return `${prefix}:{${sessionId}}:meta`;
}

const SESSION_OWNER = loadLuaScript(new URL('./session-owner.lua', import.meta.url));

type OwnerRedis = (Redis | Cluster) & { ctxSessionOwner(key: string): Promise<string | null> };

/**
 * The session directory of a service that does not hold the sessions (the
 * stack's step-context): one script call per lookup on the runner's Redis,
 * reading the owner from the session's record (sessionRecordKey), whatever the
 * number of tenants; no credential of any tenant or service is involved. A
 * Redis failure is a retryable 503 `store_unavailable`, never a 404 that
 * would hide the session.
 */
export class RedisSessionDirectory implements SessionDirectory {
  readonly #redis: OwnerRedis;
  readonly #prefix: string;

  constructor(options: { redis: Redis | Cluster; prefix?: string }) {
    const redis = options.redis as OwnerRedis;
    if (typeof redis.ctxSessionOwner !== 'function') {
      // defineCommand sends EVALSHA and falls back to EVAL on NOSCRIPT (a restarted Redis).
      redis.defineCommand('ctxSessionOwner', { numberOfKeys: 1, lua: SESSION_OWNER });
    }
    this.#redis = redis;
    this.#prefix = options.prefix ?? 'ctxflow';
  }

  async tenantOf(sessionId: string): Promise<string | undefined> {
    try {
      return (await this.#redis.ctxSessionOwner(sessionRecordKey(this.#prefix, sessionId))) ?? undefined;
    } catch (cause) {
      throw new CtxflowError('store_unavailable', 'the session records did not answer an owner lookup', { cause });
    }
  }
}
