export { createAuthenticator, DEFAULT_TENANT, isLoopback, parseApiKeys } from './auth.ts';
export { ConfigError, parseConfig } from './config.ts';
export { installErrorHandler } from './error-handler.ts';
export { createLogger, REDACTED_PATHS } from './logger.ts';
export type { Logger } from './logger.ts';
