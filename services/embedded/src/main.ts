import { createFeedTelemetry } from '@ctxflow/feeds';
import { configOrExit, createLogger, HTTP_GRACE_SHARE, handleShutdown } from '@ctxflow/service-kit';
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
  const embedded = await buildEmbeddedApp({
    config,
    logger,
    telemetry: createContextTelemetry(),
    feedTelemetry: createFeedTelemetry(),
    consumerTelemetry: createConsumerTelemetry(),
    metricsText: () => telemetry.metricsText(),
  });
  if (config.apiKeys.size === 0) {
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
      { name: 'telemetry', run: () => telemetry.shutdown() },
    ],
    { graceMs: config.shutdownGraceMs },
  );
}

await main();
