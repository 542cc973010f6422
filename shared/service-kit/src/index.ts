export { serializerCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
export { type ApiInfo, securedRoute, validatorCompiler } from './api-document.ts';
export {
  ALL_SCOPES,
  type ApiKeyEntry,
  ApiKeyRing,
  entriesOfKeyMap,
  KEY_FILE_POLL_MS,
  keyIdOf,
  parseKeyFile,
  readKeyFile,
  SCOPE,
  SCOPES,
  type Scope,
  sha256Hex,
  watchKeyFile,
} from './api-keys.ts';
export { type AuditEvent, type AuditLog, auditHook, createAuditLog } from './audit.ts';
export {
  type Authenticate,
  createAuthenticator,
  createIdentity,
  credentialsConfigured,
  DEFAULT_TENANT,
  type Identity,
  type IdentityConfig,
  isLoopback,
  LOOPBACK_IDENTITY,
  parseApiKeys,
  requireScope,
  tenantHook,
} from './auth.ts';
export { blank } from './blank.ts';
export { ConfigError, configOrExit, parseConfig, parseConfigWithAuth } from './config.ts';
export { connectOrExit, explainConnectionFailure } from './connection-failure.ts';
export {
  connectionSecurity,
  connectionSecurityVars,
  type KafkaSecurity,
  kafkaBusSecurity,
  type RedisSecurity,
  redactUrl,
  Secret,
  tlsOptions,
} from './connection-security.ts';
export {
  DEFAULT_KAFKA_SESSION_TIMEOUT_MS,
  DEFAULT_SESSION_TTL_MS,
  hostListVar,
  kafkaClientVar,
  logLevelVar,
  portVar,
  REFINE_ALWAYS,
  rebalanceTimeoutVar,
  redisUrlVar,
  refineGroupTimeouts,
  sessionTimeoutVar,
  sessionTtlVar,
  shutdownGraceVar,
  stackVars,
  topicPrefixVar,
} from './env.ts';
export { ERROR_ANSWERS, type ErrorStatus, errorAnswers } from './error-answers.ts';
export { installErrorHandler } from './error-handler.ts';
export {
  JWKS_COOLDOWN_MS,
  JWT_ALGORITHMS,
  JWT_CACHE_TTL_MS,
  JWT_CLOCK_TOLERANCE_S,
  JwtVerifier,
  type OidcOptions,
} from './jwt.ts';
export {
  closeHttp,
  DEFAULT_SHUTDOWN_GRACE_MS,
  HTTP_GRACE_SHARE,
  handleShutdown,
  type Lifecycle,
  type ShutdownOptions,
  type ShutdownStep,
  withinMs,
} from './lifecycle.ts';
export type { Logger } from './logger.ts';
export { createLogger, REDACTED_PATHS, traceMixin } from './logger.ts';
export { loadLuaScript, packScriptArgument } from './lua-scripts.ts';
export { registerTenantRateLimit, type TenantRateLimit } from './rate-limit.ts';
export { connectRedis, consumerGroupOptions, verifyRedis } from './redis.ts';
export {
  runService,
  type ServiceConfig,
  type ServiceContext,
  type ServiceDefinition,
  type ServiceTelemetry,
  type StartedService,
} from './run-service.ts';
export type { ServerOptions } from './server.ts';
export { createServer } from './server.ts';
export { MIN_SERVICE_TOKEN_LENGTH, parseServiceTokens, ServiceTokens, serviceTokensOf } from './service-token.ts';
