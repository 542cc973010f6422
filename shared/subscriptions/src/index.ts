export type { SubscriptionKeys } from './keys.ts';
export { keyDigest, subscriptionKeys } from './keys.ts';
export { MemorySubscriptionStore, type SourcePositions } from './memory-subscription-store.ts';
export { RedisSubscriptionStore } from './redis-subscription-store.ts';
export { RedisSessionDirectory, type SessionDirectory, sessionRecordKey } from './session-directory.ts';
export type { SubscriptionRoutesDeps } from './subscription-routes.ts';
export { subscriptionBodySchema, subscriptionRoutes } from './subscription-routes.ts';
export {
  candidateSubscriptions,
  type FeedFollow,
  type Subscription,
  type SubscriptionStore,
  subscriptionId,
  type UpdateTarget,
} from './subscription-store.ts';
