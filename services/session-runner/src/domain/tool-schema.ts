import { CtxflowError, FINISH_TOOL } from '@ctxflow/contracts';
import { Ajv2020 } from 'ajv/dist/2020.js';

/** Tool names every provider accepts (OpenAI, Anthropic): letters, digits, `_` and `-`, 1 to 64. */
export const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** At most this many bytes of JSON in a tool's `parameters`. */
export const MAX_PARAMETERS_BYTES = 64 * 1024;

/**
 * The parameters of `__finish__` (Contract v2): an object with an optional `result`
 * string, the run's answer or a summary of what was done.
 */
export const FINISH_PARAMETERS: Readonly<Record<string, unknown>> = Object.freeze({
  type: 'object',
  properties: Object.freeze({
    result: Object.freeze({ type: 'string', description: 'The final answer, or a summary of what was done.' }),
  }),
  additionalProperties: false,
});

/** Only the meta-schemas are used: `validateSchema` checks a schema, nothing is compiled. */
const ajv = new Ajv2020({ strict: false, validateFormats: false });

/** The JSON Schema (draft 2020-12) keywords: the parts of a path into `parameters` a refusal names. */
const KEYWORDS: ReadonlySet<string> = new Set(
  [
    '$anchor $comment $defs $dynamicAnchor $dynamicRef $id $ref $schema $vocabulary additionalProperties allOf anyOf',
    'const contains contentEncoding contentMediaType contentSchema default definitions dependentRequired',
    'dependentSchemas deprecated description else enum examples exclusiveMaximum exclusiveMinimum format if items',
    'maxContains maxItems maxLength maxProperties maximum minContains minItems minLength minProperties minimum',
    'multipleOf not oneOf pattern patternProperties prefixItems properties propertyNames readOnly required then',
    'title type unevaluatedItems unevaluatedProperties uniqueItems writeOnly',
  ]
    .join(' ')
    .split(' '),
);

/**
 * Where in `parameters` a problem is: keywords and indexes as they are, every other part (a
 * property name the caller chose) as `*`, so the refusal never echoes the caller's text.
 */
function where(instancePath: string): string {
  const parts = instancePath.split('/').slice(1);
  return ['parameters', ...parts.map((p) => (KEYWORDS.has(p) || /^\d+$/.test(p) ? p : '*'))].join('/');
}

/**
 * Checks a tool's `parameters` as a JSON Schema (draft 2020-12 meta-schema, by ajv) whose
 * `type` is `object` (providers take tool arguments as an object), at most 64 KiB of JSON.
 * Refuses with validation_error naming the tool by its index in `tools`.
 */
export function checkToolParameters(index: number, parameters: Record<string, unknown>): void {
  const refuse = (why: string): never => {
    throw new CtxflowError('validation_error', `tools.${index}.parameters: ${why}`);
  };
  const bytes = Buffer.byteLength(JSON.stringify(parameters));
  if (bytes > MAX_PARAMETERS_BYTES) refuse(`is ${bytes} bytes of JSON, over the ${MAX_PARAMETERS_BYTES}-byte limit`);
  if (parameters.type !== 'object') refuse('must be a JSON Schema with "type": "object"');
  let valid = false;
  try {
    valid = ajv.validateSchema(parameters) as boolean;
  } catch {
    // An unknown `$schema` (only draft 2020-12 is known); ajv's message quotes it.
    refuse('is not a JSON Schema: its $schema is not draft 2020-12');
  }
  if (!valid) {
    const problems = (ajv.errors ?? []).map((e) => `${where(e.instancePath)} ${e.message ?? 'is invalid'}`);
    refuse(`is not a JSON Schema: ${problems.join(', ')}`);
  }
}

/** What the model is offered for a tool: `__finish__` always has its parameters. */
export function offeredParameters(tool: { name: string; parameters?: Record<string, unknown> }) {
  return tool.parameters ?? (tool.name === FINISH_TOOL ? FINISH_PARAMETERS : undefined);
}
