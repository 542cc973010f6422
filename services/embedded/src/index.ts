export type { EmbeddedApp, EmbeddedDeps } from './build-embedded-app.ts';
export { buildEmbeddedApp } from './build-embedded-app.ts';
export type { EmbeddedConfig } from './config.ts';
export { embeddedConfigSchema, loadEmbeddedConfig } from './config.ts';
