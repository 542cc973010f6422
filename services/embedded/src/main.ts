import { createFeedTelemetry } from '@ctxflow/feeds';
import { createAuditLog, createIdentity, credentialsConfigured, runService } from '@ctxflow/service-kit';
import { createContextTelemetry } from '@ctxflow/session-runner';
import { createConsumerTelemetry } from '@ctxflow/step-context';
import { startTelemetry } from '@ctxflow/telemetry';
import { buildEmbeddedApp } from './build-embedded-app.ts';
import { loadEmbeddedConfig } from './config.ts';

/** The composition root of `npm start`: the three services in one process on in-memory adapters. */
await runService({
  name: 'ctxflow',
  logService: 'ctxflow-embedded',
  loadConfig: loadEmbeddedConfig,
  startTelemetry: () => startTelemetry({ serviceName: 'ctxflow' }),
  async start({ config, logger, telemetry }) {
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
    return {
      app: embedded.app,
      // Streams end with a `shutdown` event, in-flight requests finish, connections close by
      // their share of the grace; then the consumer and the bus.
      closeHttp: (forceAfterMs) => embedded.close({ forceAfterMs }),
      close: [{ name: 'key-file', run: async () => identity.close() }],
      listening: { feeds: Object.keys(config.secrets) },
    };
  },
});
