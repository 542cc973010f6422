/**
 * Offline validation of Kubernetes manifests, as `kubeconform -strict` would do it:
 *
 * 1. the schema: each object is validated with the model of its apiVersion and kind from
 *    kubernetes-models (the Kubernetes OpenAPI schemas compiled to validators),
 *    @kubernetes-models/keda (the KEDA CRDs), @kubernetes-models/prometheus-operator (the
 *    Prometheus Operator's CRDs), or, for Strimzi's KafkaTopic and KafkaUser,
 *    the JSON Schemas in schemas/ (no npm package ships them);
 * 2. unknown fields: the OpenAPI validators accept any extra property, so a misspelled
 *    field (`readinesProbe`) would pass them while the API server drops or refuses it. Every
 *    field is looked up in the model's TypeScript declaration with the type checker.
 *
 * A kind without a schema here is a problem, never a pass.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ObjectMeta } from '@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { TriggerAuthentication } from '@kubernetes-models/keda/keda.sh/v1alpha1/TriggerAuthentication';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Ajv, type ErrorObject } from 'ajv';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import ts from 'typescript';

const HERE = dirname(fileURLToPath(import.meta.url));
export const ROOT = join(HERE, '..', '..');

interface Validatable {
  validate(): void;
}

interface KindEntry {
  /** Schema validation; throws with the list of problems. */
  validate: (doc: Record<string, unknown>) => void;
  /** The TypeScript declaration that lists the kind's fields (module specifier, interface). */
  declaration: { module: string; name: string };
}

function model(ctor: new (data: never) => Validatable): KindEntry['validate'] {
  return (doc) => {
    // The models take the object without apiVersion and kind, and set their own.
    const { apiVersion: _a, kind: _k, ...data } = doc;
    new ctor(data as never).validate();
  };
}

const ajv = new Ajv({ allErrors: true, strict: true });
const kafkaTopicSchema = ajv.compile(
  JSON.parse(readFileSync(join(HERE, 'schemas', 'kafkatopic.kafka.strimzi.io.v1.json'), 'utf8')),
);

const kafkaUserSchema = ajv.compile(
  JSON.parse(readFileSync(join(HERE, 'schemas', 'kafkauser.kafka.strimzi.io.v1.json'), 'utf8')),
);

function formatAjv(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}`).join(', ');
}

/** `${apiVersion} ${kind}` -> its schema and declaration. */
export const KINDS: ReadonlyMap<string, KindEntry> = new Map<string, KindEntry>([
  [
    'v1 Namespace',
    { validate: model(Namespace), declaration: { module: 'kubernetes-models/v1/Namespace', name: 'INamespace' } },
  ],
  [
    'v1 ServiceAccount',
    {
      validate: model(ServiceAccount),
      declaration: { module: 'kubernetes-models/v1/ServiceAccount', name: 'IServiceAccount' },
    },
  ],
  [
    'v1 ConfigMap',
    { validate: model(ConfigMap), declaration: { module: 'kubernetes-models/v1/ConfigMap', name: 'IConfigMap' } },
  ],
  ['v1 Secret', { validate: model(Secret), declaration: { module: 'kubernetes-models/v1/Secret', name: 'ISecret' } }],
  [
    'v1 Service',
    { validate: model(Service), declaration: { module: 'kubernetes-models/v1/Service', name: 'IService' } },
  ],
  [
    'apps/v1 Deployment',
    {
      validate: model(Deployment),
      declaration: { module: 'kubernetes-models/apps/v1/Deployment', name: 'IDeployment' },
    },
  ],
  [
    'policy/v1 PodDisruptionBudget',
    {
      validate: model(PodDisruptionBudget),
      declaration: { module: 'kubernetes-models/policy/v1/PodDisruptionBudget', name: 'IPodDisruptionBudget' },
    },
  ],
  [
    'autoscaling/v2 HorizontalPodAutoscaler',
    {
      validate: model(HorizontalPodAutoscaler),
      declaration: {
        module: 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler',
        name: 'IHorizontalPodAutoscaler',
      },
    },
  ],
  [
    'networking.k8s.io/v1 NetworkPolicy',
    {
      validate: model(NetworkPolicy),
      declaration: { module: 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy', name: 'INetworkPolicy' },
    },
  ],
  [
    'monitoring.coreos.com/v1 ServiceMonitor',
    {
      validate: model(ServiceMonitor),
      declaration: {
        module: '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor',
        name: 'IServiceMonitor',
      },
    },
  ],
  [
    'monitoring.coreos.com/v1 PrometheusRule',
    {
      validate: model(PrometheusRule),
      declaration: {
        module: '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule',
        name: 'IPrometheusRule',
      },
    },
  ],
  [
    'keda.sh/v1alpha1 ScaledObject',
    {
      validate: model(ScaledObject),
      declaration: { module: '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject', name: 'IScaledObject' },
    },
  ],
  [
    'keda.sh/v1alpha1 TriggerAuthentication',
    {
      validate: model(TriggerAuthentication),
      declaration: {
        module: '@kubernetes-models/keda/keda.sh/v1alpha1/TriggerAuthentication',
        name: 'ITriggerAuthentication',
      },
    },
  ],
  [
    'kafka.strimzi.io/v1 KafkaTopic',
    {
      validate: (doc) => {
        if (!kafkaTopicSchema(doc)) throw new Error(formatAjv(kafkaTopicSchema.errors));
        new ObjectMeta((doc.metadata ?? {}) as never).validate();
      },
      // The JSON Schema closes every object but metadata: that one is checked here.
      declaration: { module: '@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta', name: 'IObjectMeta' },
    },
  ],
  [
    'kafka.strimzi.io/v1 KafkaUser',
    {
      validate: (doc) => {
        if (!kafkaUserSchema(doc)) throw new Error(formatAjv(kafkaUserSchema.errors));
        new ObjectMeta((doc.metadata ?? {}) as never).validate();
      },
      // As for KafkaTopic: the JSON Schema closes every object but metadata.
      declaration: { module: '@kubernetes-models/apimachinery/apis/meta/v1/ObjectMeta', name: 'IObjectMeta' },
    },
  ],
]);

/** The field names of every declaration, resolved once with the TypeScript checker. */
class DeclaredFields {
  readonly #checker: ts.TypeChecker;
  readonly #types = new Map<string, ts.Type>();

  constructor(entries: ReadonlyMap<string, KindEntry>) {
    // A virtual module beside the tests, so that node_modules resolves as for the tests.
    const fileName = join(HERE, '__declared-fields__.ts');
    const keys = [...entries.keys()];
    const source = keys
      .map((key, i) => {
        const { module, name } = entries.get(key)!.declaration;
        return `import type { ${name} as T${i} } from '${module}';\nexport type K${i} = T${i};`;
      })
      .join('\n');
    const options: ts.CompilerOptions = {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: [],
    };
    const host = ts.createCompilerHost(options);
    const getSourceFile = host.getSourceFile.bind(host);
    const fileExists = host.fileExists.bind(host);
    const readFile = host.readFile.bind(host);
    host.getSourceFile = (name, language, ...rest) =>
      name === fileName ? ts.createSourceFile(name, source, language) : getSourceFile(name, language, ...rest);
    host.fileExists = (name) => name === fileName || fileExists(name);
    host.readFile = (name) => (name === fileName ? source : readFile(name));
    const program = ts.createProgram([fileName], options, host);
    this.#checker = program.getTypeChecker();
    const file = program.getSourceFile(fileName)!;
    const unresolved = ts
      .getPreEmitDiagnostics(program, file)
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    if (unresolved.length > 0) throw new Error(`declarations not found: ${unresolved.join('; ')}`);
    for (const statement of file.statements) {
      if (!ts.isTypeAliasDeclaration(statement)) continue;
      const index = Number(statement.name.text.slice(1));
      this.#types.set(keys[index]!, this.#checker.getTypeAtLocation(statement.name));
    }
  }

  /** The paths of the fields of `doc` that its declaration does not have. */
  unknownFields(key: string, doc: unknown): string[] {
    const type = this.#types.get(key);
    if (!type) return [`${key}: no declaration`];
    const found: string[] = [];
    const strimzi = key.startsWith('kafka.strimzi.io/');
    const root = strimzi ? (doc as { metadata?: unknown }).metadata : doc;
    this.#walk(root, type, strimzi ? 'metadata' : '', found);
    return found;
  }

  #walk(value: unknown, declared: ts.Type, path: string, found: string[]): void {
    if (value === null || typeof value !== 'object') return;
    const type = this.#checker.getNonNullableType(declared);
    if (type.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) return;
    if (type.isUnion()) {
      // A union of objects: the value must fit one of them.
      const candidates = type.types.filter((t) => t.flags & ts.TypeFlags.Object);
      let best: string[] | undefined;
      for (const candidate of candidates) {
        const attempt: string[] = [];
        this.#walk(value, candidate, path, attempt);
        if (attempt.length === 0) return;
        if (!best || attempt.length < best.length) best = attempt;
      }
      if (best) found.push(...best);
      return;
    }
    if (Array.isArray(value)) {
      if (!this.#checker.isArrayType(type)) return; // a type mismatch: the schema reports it
      const element = this.#checker.getTypeArguments(type as ts.TypeReference)[0]!;
      value.forEach((item, i) => {
        this.#walk(item, element, `${path}[${i}]`, found);
      });
      return;
    }
    const index = this.#checker.getIndexInfoOfType(type, ts.IndexKind.String);
    for (const [field, child] of Object.entries(value)) {
      const property = this.#checker.getPropertyOfType(type, field);
      const at = path ? `${path}.${field}` : field;
      if (property) this.#walk(child, this.#checker.getTypeOfSymbol(property), at, found);
      else if (index) this.#walk(child, index.type, at, found);
      else found.push(at);
    }
  }
}

let declaredFields: DeclaredFields | undefined;

/**
 * Builds the TypeScript program behind the unknown-field check (seconds of work): call it in
 * a `beforeAll`, whose timeout is longer than a test's.
 */
export function prepareDeclaredFields(): DeclaredFields {
  declaredFields ??= new DeclaredFields(KINDS);
  return declaredFields;
}

/**
 * Every problem of one manifest object, as readable lines; empty when it is valid.
 * `where` names the object in the messages (file and document).
 */
export function validateManifest(doc: unknown, where: string): string[] {
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return [`${where}: not an object`];
  const { apiVersion, kind } = doc as { apiVersion?: unknown; kind?: unknown };
  const key = `${String(apiVersion)} ${String(kind)}`;
  const entry = KINDS.get(key);
  if (!entry) return [`${where}: no schema for apiVersion "${String(apiVersion)}" kind "${String(kind)}"`];
  const problems: string[] = [];
  try {
    entry.validate(doc as Record<string, unknown>);
  } catch (err) {
    problems.push(`${where} (${key}): ${err instanceof Error ? err.message : String(err)}`);
  }
  for (const field of prepareDeclaredFields().unknownFields(key, doc)) {
    problems.push(`${where} (${key}): unknown field "${field}"`);
  }
  return problems;
}
