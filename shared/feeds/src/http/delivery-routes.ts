import { feedSourceSchema } from '@ctxflow/contracts';
import { SCOPE, type ZodTypeProvider } from '@ctxflow/service-kit';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { DeliveryIndex, DeliveryReceipt } from '../ports/delivery-index.ts';
import type { DeliveryLedger } from '../ports/delivery-ledger.ts';
import { ledgerId } from './feed-routes.ts';

export interface DeliveryRoutesDeps {
  deliveries: DeliveryIndex;
  /** The feeds' ledger (the same keys the feed routes and the feed-ingestor write). */
  ledger: DeliveryLedger;
  /**
   * Who owns a session now (the runner's records): a receipt of a session that was erased,
   * expired, or is another tenant's is never shown.
   */
  sessions: { tenantOf(sessionId: string): Promise<string | undefined> };
}

const deliveryParams = z.object({
  source: feedSourceSchema,
  eventId: z.string().min(1).max(256).meta({ description: "The feed's event id (the delivery id it deduplicates by)" }),
});

const deliverySession = z
  .object({
    sessionId: z.string(),
    stepId: z.string().describe('The step whose commit wrote the hook row: its model request first carried the update'),
    rowId: z.string().describe('The hook row that carries the update'),
    requestId: z.string().optional().describe("The step's request id (the model request), when its runtime sent one"),
    at: z.string().describe('When the step committed, ISO 8601'),
  })
  .meta({ id: 'DeliverySession', title: 'DeliverySession' });

const deliveryReceipt = z
  .object({
    source: z.string(),
    eventId: z.string(),
    accepted: z
      .boolean()
      .describe(
        'The feed verified the delivery and took it: it is being handed to the bus, was handed to it, or reached a session',
      ),
    published: z
      .boolean()
      .describe(
        "The bus acknowledged the update (the feed's ledger holds it as done, within its retention), or it reached a session",
      ),
    sessions: z.array(deliverySession).describe("Each of the tenant's sessions the update reached, in commit order"),
  })
  .meta({ id: 'DeliveryReceipt', title: 'DeliveryReceipt' });

function sessionOf(receipt: DeliveryReceipt): z.infer<typeof deliverySession> {
  const { sessionId, stepId, rowId, requestId, at } = receipt;
  return requestId === undefined ? { sessionId, stepId, rowId, at } : { sessionId, stepId, rowId, requestId, at };
}

/**
 * `GET /deliveries/:source/:eventId`: where one ticket-update delivery of the caller's
 * tenant went. Expects `request.tenant` set by the caller's auth hook in an enclosing
 * scope (service-kit tenantHook). A delivery never seen, another tenant's, or one whose
 * ledger mark and receipts ended is answered 200 with `accepted` false and no sessions:
 * the answer says what ctxflow knows, and never whether another tenant sent that id.
 */
export async function deliveryRoutes(app: FastifyInstance, deps: DeliveryRoutesDeps): Promise<void> {
  const api = app.withTypeProvider<ZodTypeProvider>();
  api.get(
    '/deliveries/:source/:eventId',
    {
      config: { scope: SCOPE.read },
      schema: {
        tags: ['feeds'],
        operationId: 'getDelivery',
        summary: 'Where a ticket-update delivery went: accepted, published, each session and step it reached',
        params: deliveryParams,
        response: { 200: deliveryReceipt },
      },
    },
    async (request, reply) => {
      const { source, eventId } = request.params;
      const { tenant } = request;
      const [state, receipts] = await Promise.all([
        deps.ledger.state(ledgerId({ tenant, id: `${source}:${eventId}` })),
        deps.deliveries.receipts(tenant, source, eventId),
      ]);
      const owners = await Promise.all(receipts.map((r) => deps.sessions.tenantOf(r.sessionId)));
      const sessions = receipts.filter((_r, i) => owners[i] === tenant).map(sessionOf);
      // Only a published update reaches a session (through the ticket-updates topic).
      const published = state === 'done' || receipts.length > 0;
      const accepted = published || state === 'in_flight';
      return reply.status(200).send({ source, eventId, accepted, published, sessions });
    },
  );
}
