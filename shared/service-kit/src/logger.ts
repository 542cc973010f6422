import pino from 'pino';

/** Paths that must never reach a log line: credentials and webhook bodies. */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers["x-ctxflow-signature"]',
  'req.headers["x-hub-signature"]',
  'req.headers["x-hub-signature-256"]',
  'req.headers["x-zendesk-webhook-signature"]',
  'headers.authorization',
  '*.secret',
  '*.apiKey',
  '*.body',
];

export type Logger = pino.Logger;

export function createLogger(options: {
  service: string;
  level?: string;
  destination?: pino.DestinationStream;
}): Logger {
  return pino(
    {
      level: options.level ?? 'info',
      base: { service: options.service },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
    },
    options.destination,
  );
}
