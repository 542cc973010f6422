/**
 * `@ctxflow/client`'s wire types are the served document's: clients/typescript/src/generated/openapi.ts
 * is what openapi-typescript makes of the `/openapi.json` the embedded app serves today, so a route
 * whose schema changes without `npm run openapi:client` fails here (and a hand edit of the file too).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CLIENT_TYPES_PATH, renderClientTypes, servedDocument } from '../../scripts/openapi-client.ts';

describe('the client wire types', () => {
  it('are what openapi-typescript generates from the served /openapi.json', async () => {
    const expected = await renderClientTypes(await servedDocument());
    expect(readFileSync(CLIENT_TYPES_PATH, 'utf8')).toBe(expected);
  });

  it('change with the document: one more answer field is one more field in the types', async () => {
    const document = structuredClone(await servedDocument()) as any;
    document.components.schemas.AgentUpdated.properties.plantedField = { type: 'string' };
    const text = await renderClientTypes(document);
    expect(text).not.toBe(readFileSync(CLIENT_TYPES_PATH, 'utf8'));
    expect(text).toMatch(/AgentUpdated: \{[^}]*plantedField\?: string;/);
  });
});
