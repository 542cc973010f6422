/** Types of what the inspector page's script exports (the page itself is plain JavaScript). */

export interface InspectedStep {
  stepId: string;
  ordinal: number;
  mode: string;
  logEnd: number;
  system: string;
  cache?: { rebuilt: boolean; reason?: string };
}

export type InspectedEntry =
  | { type: 'row'; row: { kind: string; source: string; content?: string; disable?: string[]; enable?: string[] } }
  | { type: 'message'; role: string; content: string };

export interface StepReuse {
  stepId: string;
  ordinal: number;
  mode: string;
  rebuilt: boolean;
  reason: string | null;
  /** UTF-8 bytes of `JSON.stringify(request.messages)`. */
  requestBytes: number;
  /** Leading bytes equal to the previous step's request; 0 for the first step. */
  prefixReusedBytes: number;
}

export function renderRow(row: InspectedEntry & { type: 'row' }['row']): string;
export function requestMessages(system: string, entries: InspectedEntry[]): { role: string; content: string }[];
export function prefixReuse(steps: InspectedStep[], log: InspectedEntry[]): StepReuse[];

export interface InspectedUsage {
  stepId: string;
  ordinal: number;
  format: string;
  inputTokens: number;
  cachedTokens: number;
  predictedTokens: number | null;
  shortfall: boolean;
}

export interface ProviderCacheRow extends InspectedUsage {
  /** The cached share of the input, e.g. `"97%"`. */
  hit: string;
}

export function providerCacheRows(usage: InspectedUsage[]): ProviderCacheRow[];
