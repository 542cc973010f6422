/**
 * Requests made from an OpenAPI operation: values from its parameter and body schemas
 * (json-schema-faker, seeded), valid or mutated as a plan says (fast-check draws the plans).
 */
import fc from 'fast-check';
import { createGeneratorSync } from 'json-schema-faker';

export const BODY_KINDS = [
  'valid',
  'valid',
  'wrong-type',
  'missing-required',
  'extra-field',
  'huge-string',
  'null',
  'array',
  'malformed',
  'wrong-content-type',
  'no-content-type',
  'empty',
] as const;

export interface Plan {
  auth: 'key' | 'none' | 'wrong';
  path: 'real' | 'random' | 'bad-escape' | 'huge';
  query: 'none' | 'valid' | 'wrong';
  body: (typeof BODY_KINDS)[number];
  /** Picks a field, a media type, an escape. */
  pick: number;
}

export const planArbitrary: fc.Arbitrary<Plan> = fc.record({
  auth: fc.constantFrom('key', 'key', 'key', 'key', 'none', 'wrong'),
  path: fc.constantFrom('real', 'real', 'real', 'random', 'bad-escape', 'huge'),
  query: fc.constantFrom('none', 'valid', 'wrong'),
  body: fc.constantFrom(...BODY_KINDS),
  pick: fc.nat(),
});

type Schema = Record<string, any>;

/** OpenAPI keywords that are not JSON Schema: json-schema-faker would take them for properties. */
const NOT_JSON_SCHEMA = new Set(['discriminator', 'xml', 'externalDocs', 'example']);

/** A schema with the document's components as `$defs`, so it stands alone. */
export function standalone(schema: unknown, components: Record<string, unknown>): Schema {
  const text = JSON.stringify({ ...(schema as Schema), $defs: components }).replaceAll(
    '"#/components/schemas/',
    '"#/$defs/',
  );
  return JSON.parse(text, function (this: unknown, key: string, value: unknown) {
    return NOT_JSON_SCHEMA.has(key) && !Array.isArray(this) ? undefined : value;
  });
}

const MEDIA_TYPES = ['text/plain', 'application/xml', 'application/x-www-form-urlencoded', 'multipart/form-data'];
const BAD_ESCAPES = ['%ZZ', '%E0%A4%A', '%', 'a%2'];

function wrongTyped(value: unknown): unknown {
  if (typeof value === 'string') return 12345;
  if (typeof value === 'number') return 'not a number';
  if (typeof value === 'boolean') return 'true';
  if (Array.isArray(value)) return { not: 'an array' };
  if (value === null) return [];
  return ['not', 'an', 'object'];
}

export interface Operation {
  key: string;
  method: string;
  path: string;
  parameters: { name: string; in: string; schema?: Schema; required?: boolean }[];
  bodySchema: Schema | undefined;
}

export interface BuiltRequest {
  path: string;
  headers: Record<string, string>;
  body: string | Uint8Array | undefined;
  /** The JSON value sent, when the body is one (signed feeds use it). */
  describe: string;
}

/** Values for a path parameter named so, when the plan wants a real one. */
export type RealIds = Record<string, () => string>;

/**
 * One request of `operation` as `plan` says, values from `seed`: `ids` give real path parameters
 * and real ids in bodies, `apiKey` the bearer.
 */
export function buildRequest(
  operation: Operation,
  plan: Plan,
  seed: number,
  context: { components: Record<string, unknown>; ids: RealIds; apiKey: string },
): BuiltRequest {
  const faker = createGeneratorSync({ seed, maxLength: 200, maxItems: 4, maxDefaultItems: 3, maxDepth: 4 });
  const fake = (schema: Schema | undefined) => faker.generate(standalone(schema ?? {}, context.components));
  let path = operation.path;
  for (const p of operation.parameters.filter((q) => q.in === 'path')) {
    const value =
      plan.path === 'real' && context.ids[p.name]
        ? context.ids[p.name]!()
        : plan.path === 'bad-escape'
          ? BAD_ESCAPES[plan.pick % BAD_ESCAPES.length]!
          : plan.path === 'huge'
            ? 'h'.repeat(300)
            : encodeURIComponent(String(fake(p.schema ?? { type: 'string' }) || 'x'));
    path = path.replace(`{${p.name}}`, value);
  }
  const query = new URLSearchParams();
  for (const p of operation.parameters.filter((q) => q.in === 'query')) {
    if (plan.query === 'valid') query.set(p.name, String(fake(p.schema)));
    if (plan.query === 'wrong') query.set(p.name, 'zz-not-a-value');
  }
  if (query.size > 0) path += `?${query}`;
  const headers: Record<string, string> = {};
  if (plan.auth === 'key') headers.authorization = `Bearer ${context.apiKey}`;
  if (plan.auth === 'wrong') headers.authorization = 'Bearer not-a-key';
  if (operation.method === 'GET') return { path, headers, body: undefined, describe: '' };

  const schema = operation.bodySchema ?? {};
  let value: any = fake(schema);
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    // Real ids where the body names them, most of the time, to reach past the 404s.
    for (const field of Object.keys(value)) {
      const id = context.ids[field] ?? context.ids[field.replace(/^(to|before|at)StepId$/, 'stepId')];
      if (id && plan.pick % 4 !== 0) value[field] = id();
    }
  }
  const fields = value !== null && typeof value === 'object' && !Array.isArray(value) ? Object.keys(value) : [];
  const field = fields[plan.pick % Math.max(fields.length, 1)];
  const required: string[] = standalone(schema, context.components).required ?? [];
  switch (plan.body) {
    case 'wrong-type':
      if (field === undefined) value = wrongTyped(value);
      else value[field] = wrongTyped(value[field]);
      break;
    case 'missing-required':
      if (required.length > 0 && fields.length > 0) delete value[required[plan.pick % required.length]!];
      else value = {};
      break;
    case 'extra-field':
      value =
        fields.length > 0 || (value !== null && typeof value === 'object') ? { ...value, zzUnexpected: 1 } : value;
      break;
    case 'huge-string':
      if (field === undefined) value = 'x'.repeat(300_000);
      else value[typeof value[field] === 'string' ? field : 'zzHuge'] = 'x'.repeat(300_000);
      break;
    case 'null':
      value = null;
      break;
    case 'array':
      value = [value];
      break;
  }
  const json = JSON.stringify(value) ?? 'null';
  const describe = plan.body === 'huge-string' ? `${json.slice(0, 80)}...` : json.slice(0, 200);
  if (plan.body === 'malformed')
    return { path, headers: { ...headers, 'content-type': 'application/json' }, body: '{"a":', describe: '{"a":' };
  if (plan.body === 'empty')
    return { path, headers: { ...headers, 'content-type': 'application/json' }, body: '', describe: '(empty)' };
  if (plan.body === 'no-content-type') return { path, headers, body: new TextEncoder().encode(json), describe };
  const type = plan.body === 'wrong-content-type' ? MEDIA_TYPES[plan.pick % MEDIA_TYPES.length]! : 'application/json';
  return { path, headers: { ...headers, 'content-type': type }, body: json, describe };
}
