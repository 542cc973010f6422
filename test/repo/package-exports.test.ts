/**
 * A package's index is its public surface: what the other workspaces and an embedding
 * application use. Helpers that only tests call are imported by tests from their file,
 * not exported for everyone.
 */
import * as bus from '@ctxflow/bus';
import * as feedIngestor from '@ctxflow/feed-ingestor';
import * as feeds from '@ctxflow/feeds';
import * as sessionRunner from '@ctxflow/session-runner';
import * as stepContext from '@ctxflow/step-context';
import * as subscriptions from '@ctxflow/subscriptions';
import { describe, expect, it } from 'vitest';

const INTERNALS: [string, Record<string, unknown>, string[]][] = [
  ['@ctxflow/bus', bus, ['murmur2', 'partitionForKey']],
  ['@ctxflow/feed-ingestor', feedIngestor, ['FEEDS', 'ledgerKeys', 'DEFAULT_FEED_MAX_BYTES', 'DEFAULT_LEASE_MS']],
  ['@ctxflow/feeds', feeds, ['FEEDS', 'ledgerKeys']],
  ['@ctxflow/subscriptions', subscriptions, ['matchesUpdate', 'ANY_TICKET', 'compareSubscriptions']],
  [
    '@ctxflow/session-runner',
    sessionRunner,
    [
      'RecentMap',
      'SessionCache',
      'fingerprint',
      'foldCursor',
      'foldActiveTools',
      'fitBatch',
      'leftOutNotice',
      'parseHookResult',
      'runHook',
      'renderRequest',
      'renderRow',
      'rowRole',
      'hookSelector',
    ],
  ],
  [
    '@ctxflow/step-context',
    stepContext,
    [
      'fitEntries',
      'parseCursor',
      'MAX_ENTRIES_PER_FETCH',
      'renderNotice',
      'foldChanges',
      'quote',
      'isStale',
      'nextMark',
      'matchesUpdate',
      'subscriptionId',
      'ANY_TICKET',
      'MAX_RECORDS_PER_WRITE',
    ],
  ],
];

describe('package indexes', () => {
  it.each(INTERNALS)('%s exports no internal helper', (_name, module, internals) => {
    expect(internals.filter((name) => name in module)).toEqual([]);
  });

  it('still export what the services and an embedding application wire together', () => {
    expect(typeof sessionRunner.createEngine).toBe('function');
    expect(typeof sessionRunner.ContextEngine).toBe('function');
    expect(typeof stepContext.FeedStepContext).toBe('function');
    // The subscription body is part of the public contract (the OpenAPI document names it).
    expect(typeof subscriptions.subscriptionBodySchema).toBe('object');
    expect(typeof feedIngestor.buildFeedApp).toBe('function');
    expect(typeof feeds.feedRoutes).toBe('function');
    expect(typeof subscriptions.subscriptionRoutes).toBe('function');
    expect(typeof bus.createMemoryBus).toBe('function');
  });
});
