import { createMemoryBus } from '@ctxflow/bus';
import { busContract } from './bus.contract.ts';

busContract({
  name: 'memory',
  create: () => createMemoryBus({ retryBackoffMs: 20 }),
  settleMs: 0,
  deliveryTimeoutMs: 5_000,
});
