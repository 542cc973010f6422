export type { FeedAppDeps } from './build-app.ts';
export { buildFeedApp } from './build-app.ts';
export type { FeedConfig } from './config.ts';
export { feedConfigSchema, loadFeedConfig } from './config.ts';
