import { createFeedTelemetry } from '@ctxflow/feeds';
import {
  configOrExit,
  createAuditLog,
  createIdentity,
  createLogger,
  credentialsConfigured,
  HTTP_GRACE_SHARE,
  handleShutdown,
} from '@ctxflow/service-kit';
import { createContextTelemetry } from '@ctxflow/session-runner';
import { createConsumerTelemetry } from '@ctxflow/step-context';
import { startTelemetry } from '@ctxflow/telemetry';
import { buildEmbeddedApp } from './build-embedded-app.ts';
import { loadEmbeddedConfig } from './config.ts';

/** The composition root of `npm start`: reads configuration once, builds, listens. */
async function main() {
  const config = configOrExit('ctxflow', () => loadEmbeddedConfig(process.env));
  const logger = createLogger({ service: 'ctxflow-embedded', level: config.logLevel });
  const telemetry = startTelemetry({ serviceName: 'ctxflow' });
  const identity = createIdentity(config.identity, { log: logger, audit: createAuditLog(logger) });
  const embedded = await buildEmbeddedApp({
    config,
    logger,
    authenticate: identity.authenticate,
    telemetry: createContextTelemetry(),
    feedTelemetry: createFeedTelemetry(),
    consumerTelemetry: createConsumerTelemetry(),
    metricsText: () => telemetry.metricsText(),
  });
  if (!credentialsConfigured(config.identity)) {
    logger.warn(`no CTXFLOW_API_KEYS: serving loopback only (${config.host}), every caller is tenant "default"`);
  }
  await embedded.app.listen({ host: config.host, port: config.port });
  const feeds = Object.keys(config.secrets);
  logger.info({ host: config.host, port: config.port, feeds }, 'ctxflow embedded: listening');

  handleShutdown(
    'ctxflow embedded',
    logger,
    () => [
      // Streams end with a `shutdown` event, in-flight requests finish, connections close by half the grace.
      { name: 'http', run: () => embedded.close({ forceAfterMs: config.shutdownGraceMs * HTTP_GRACE_SHARE }) },
      { name: 'key-file', run: async () => identity.close() },
      { name: 'telemetry', run: () => telemetry.shutdown() },
    ],
    { graceMs: config.shutdownGraceMs },
  );
}

await main();
