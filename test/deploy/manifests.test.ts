/**
 * The deployment files, validated offline: every Kubernetes manifest in deploy/kubernetes
 * against the Kubernetes, KEDA and Strimzi schemas with unknown fields refused
 * (kube-schemas.ts), docker-compose.yml against the Compose Specification's JSON Schema
 * (the copy dclint ships), and the facts the services rely on (names, ports, groups,
 * topics, probes) checked against the code's own constants. Each validator is also shown a
 * broken copy and must refuse it.
 *
 * Longer than 400 lines: every manifest, the compose file and the Dockerfile against one set of the code's constants, read once at the top.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { FEED_SOURCES, TOPICS } from '@ctxflow/contracts';
import { loadEmbeddedConfig } from '@ctxflow/embedded';
import { loadFeedConfig } from '@ctxflow/feed-ingestor';
import { feedSecretVar } from '@ctxflow/feeds';
import { DEFAULT_SHUTDOWN_GRACE_MS, shutdownGraceVar } from '@ctxflow/service-kit';
import { loadRunnerConfig } from '@ctxflow/session-runner';
import { loadStepContextConfig } from '@ctxflow/step-context';
import { Ajv } from 'ajv';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { z } from 'zod';
import { defaultHeldBytes } from '../../services/session-runner/src/adapters/caching-session-store.ts';
import { DEFAULT_PROMPT_CACHE_BYTES } from '../../services/session-runner/src/adapters/redis-session-store.ts';
import {
  CONTEXT_ROW_PROGRESS_CONFIG,
  CONTEXT_ROW_PROGRESS_TOPIC,
} from '../../services/session-runner/src/context-row-relay.ts';
import { STEP_CONSUMER_GROUP } from '../../services/session-runner/src/step-request-consumer.ts';
import { STEP_CONTEXT_GROUP } from '../../services/step-context/src/domain/step-context-service.ts';
import { prepareDeclaredFields, ROOT, validateManifest } from './kube-schemas.ts';

const KUBE_DIR = join(ROOT, 'deploy', 'kubernetes');

type Doc = Record<string, any>;

/** Every YAML document of a file; a YAML syntax error fails the test that reads it. */
function readDocs(text: string, where: string): Doc[] {
  return parseAllDocuments(text).map((doc, i) => {
    if (doc.errors.length > 0) throw new Error(`${where}#${i}: ${doc.errors.map((e) => e.message).join('; ')}`);
    return doc.toJS() as Doc;
  });
}

function manifestFiles(): string[] {
  return readdirSync(KUBE_DIR)
    .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
    .sort();
}

let manifests: { file: string; doc: Doc }[] | undefined;

/** All objects of deploy/kubernetes, with the file they come from (read once; never modified). */
function allManifests(): { file: string; doc: Doc }[] {
  manifests ??= manifestFiles().flatMap((file) =>
    readDocs(readFileSync(join(KUBE_DIR, file), 'utf8'), file).map((doc) => ({ file, doc })),
  );
  return manifests;
}

function find(kind: string, name: string): Doc {
  const hit = allManifests().find(({ doc }) => doc.kind === kind && doc.metadata?.name === name);
  if (!hit) throw new Error(`no ${kind} ${name} in deploy/kubernetes`);
  return hit.doc;
}

/** A Kubernetes or Compose memory quantity (`512Mi`, `1Gi`, `512m` in Compose) in bytes. */
function quantityBytes(quantity: string): number {
  const match = /^(\d+)(Ki|Mi|Gi|k|m|g)?$/.exec(String(quantity));
  if (!match) throw new Error(`unexpected memory quantity ${quantity}`);
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30 }[match[2] ?? ''] ?? 1;
  return Number(match[1]) * unit;
}

/** V8's old-space cap from NODE_OPTIONS (`--max-old-space-size=<MiB>`), in bytes. */
function heapCapBytes(nodeOptions: string | undefined): number {
  const match = /(?:^|\s)--max-old-space-size=(\d+)(?:\s|$)/.exec(nodeOptions ?? '');
  if (!match) throw new Error(`NODE_OPTIONS sets no heap cap: ${nodeOptions}`);
  return Number(match[1]) * 2 ** 20;
}

/** The NODE_OPTIONS the image sets by default. */
function dockerfileNodeOptions(): string | undefined {
  return /NODE_OPTIONS=(?:"([^"]*)"|(\S+))/
    .exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))
    ?.slice(1)
    .find(Boolean);
}

const SERVICES = [
  { name: 'session-runner', port: 8080, portVar: 'CTXFLOW_PORT' },
  { name: 'feed-ingestor', port: 8081, portVar: 'CTXFLOW_FEED_PORT' },
  { name: 'step-context', port: 8082, portVar: 'CTXFLOW_STEP_CONTEXT_PORT' },
] as const;

/** The session-runner's Kafka settings as its Deployment configures them (ConfigMap, then its own env). */
function runnerKafkaSettings() {
  const env: Record<string, string> = { ...find('ConfigMap', 'ctxflow-config').data };
  for (const e of find('Deployment', 'session-runner').spec.template.spec.containers[0].env) {
    if (e.value !== undefined) env[e.name] = e.value;
  }
  const picked = ['KAFKA_BROKERS', 'KAFKA_TOPIC_PREFIX', 'CTXFLOW_REDIS_PREFIX', 'CTXFLOW_CONTEXT_ROW_SHARDS'];
  return loadRunnerConfig(Object.fromEntries(picked.filter((k) => env[k] !== undefined).map((k) => [k, env[k]!])));
}

type Acl = { resource: { type: string; name?: string; patternType?: string }; operations: string[] };

/** The session-runner's kafkajs client id (services/session-runner/src/main.ts): its takeover's throwaway groups. */
const RUNNER_CLIENT_ID = 'ctxflow-session-runner';

/**
 * What the services do on Kafka that `acls` do not allow, as `<type> <name>: <operation>`:
 * the contract topics and the progress topic (produce, consume, create when missing), the
 * consumer groups, the relay's throwaway groups (read, then deleted), and the relay's
 * transactional ids, one per outbox shard (`<CTXFLOW_REDIS_PREFIX>-context-rows-<shard>`).
 */
function aclGaps(acls: Acl[]): string[] {
  const runner = runnerKafkaSettings();
  const allows = (type: string, name: string, operation: string) =>
    acls.some(
      (acl) =>
        acl.resource.type === type &&
        (acl.resource.patternType === 'prefix' ? name.startsWith(acl.resource.name!) : acl.resource.name === name) &&
        acl.operations.includes(operation),
    );
  const needs: [string, string, string, string][] = [];
  for (const topic of [...Object.values(TOPICS), CONTEXT_ROW_PROGRESS_TOPIC]) {
    for (const op of ['Describe', 'Read', 'Write', 'Create']) needs.push(['topic', topic, topic, op]);
  }
  for (const group of [runner.groupId ?? STEP_CONSUMER_GROUP, STEP_CONTEXT_GROUP]) {
    for (const op of ['Describe', 'Read']) needs.push(['group', group, group, op]);
  }
  const throwaway = `${RUNNER_CLIENT_ID}-last-committed-`;
  for (const op of ['Describe', 'Read', 'Delete']) {
    needs.push(['group', `${throwaway}${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}`, `${throwaway}<uuid>`, op]);
  }
  for (let shard = 0; shard < runner.contextRowShards; shard++) {
    const id = `${runner.redisPrefix}-context-rows-${shard}`;
    for (const op of ['Describe', 'Write']) needs.push(['transactionalId', id, id, op]);
  }
  return needs
    .filter(([type, name, , op]) => !allows(type, name, op))
    .map(([type, , shown, op]) => `${type} ${shown}: ${op}`);
}

describe('Kubernetes manifests (deploy/kubernetes)', () => {
  beforeAll(() => {
    prepareDeclaredFields();
  });

  it('every object validates against its schema, with no unknown field', () => {
    const manifests = allManifests();
    const problems = manifests.flatMap(({ file, doc }, i) => validateManifest(doc, `${file}#${i}`));
    expect(problems).toEqual([]);
    // The set of kinds is what the deployment needs; a file that parsed to nothing would show here.
    const kinds = manifests.map(({ doc }) => `${doc.kind}/${doc.metadata.name}`).sort();
    expect(kinds).toEqual(
      [
        'ConfigMap/ctxflow-config',
        'Deployment/feed-ingestor',
        'Deployment/session-runner',
        'Deployment/step-context',
        'HorizontalPodAutoscaler/feed-ingestor',
        'KafkaTopic/ctxflow.context-rows.progress.v1',
        'KafkaTopic/ctxflow.context-rows.v1',
        'KafkaTopic/ctxflow.step-requests.dlq.v1',
        'KafkaTopic/ctxflow.step-requests.v1',
        'KafkaTopic/ctxflow.step-results.v1',
        'KafkaTopic/ctxflow.ticket-updates.dlq.v1',
        'KafkaTopic/ctxflow.ticket-updates.v1',
        'KafkaUser/ctxflow',
        'Namespace/ctxflow',
        'NetworkPolicy/default-deny-ingress',
        'NetworkPolicy/feed-ingestor-webhooks',
        'NetworkPolicy/metrics-from-monitoring',
        'NetworkPolicy/session-runner-api',
        'NetworkPolicy/step-context-from-session-runner',
        'PodDisruptionBudget/feed-ingestor',
        'PodDisruptionBudget/session-runner',
        'PodDisruptionBudget/step-context',
        'PrometheusRule/ctxflow',
        'ScaledObject/session-runner',
        'ScaledObject/step-context',
        'Secret/ctxflow-api-keys',
        'Secret/ctxflow-secrets',
        'Secret/ctxflow-service-token',
        'Service/feed-ingestor',
        'Service/session-runner',
        'Service/step-context',
        'ServiceAccount/ctxflow',
        'ServiceMonitor/ctxflow',
        'TriggerAuthentication/ctxflow-kafka',
      ].sort(),
    );
  });

  it('kustomization.yaml lists exactly the files of the folder', () => {
    const [kustomization] = readDocs(readFileSync(join(KUBE_DIR, 'kustomization.yaml'), 'utf8'), 'kustomization');
    expect(kustomization!.kind).toBe('Kustomization');
    expect([...kustomization!.resources].sort()).toEqual(manifestFiles());
    expect(kustomization!.namespace).toBe('ctxflow');
    for (const { file, doc } of allManifests()) {
      if (doc.kind !== 'Namespace') expect(doc.metadata.namespace, `${file} ${doc.kind}`).toBe('ctxflow');
    }
  });

  it.each(SERVICES)('$name: probes, resources, non-root, PDB and Service match the process', (service) => {
    const deployment = find('Deployment', service.name);
    const pod = deployment.spec.template.spec;
    const [container] = pod.containers;
    expect(pod.containers).toHaveLength(1);
    // The image's entry point for this service, which must exist in the repository.
    expect(container.command).toEqual(['node', `services/${service.name}/src/main.ts`]);
    expect(readFileSync(join(ROOT, container.command[1]), 'utf8').length).toBeGreaterThan(0);
    expect(container.ports).toEqual([{ name: 'http', containerPort: service.port, protocol: 'TCP' }]);
    expect(container.env).toContainEqual({ name: service.portVar, value: String(service.port) });
    expect(container.envFrom).toEqual([
      { configMapRef: { name: 'ctxflow-config' } },
      { secretRef: { name: 'ctxflow-secrets' } },
    ]);
    expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(container.resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    expect(container.resources.limits).toMatchObject({ memory: expect.any(String) });
    // The "restricted" Pod Security Standard the namespace enforces.
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
    expect(container.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    // Autoscaled: a re-apply must not reset the replica count.
    expect(deployment.spec.replicas).toBeUndefined();

    const labels = deployment.spec.selector.matchLabels;
    expect(deployment.spec.template.metadata.labels).toMatchObject(labels);
    const pdb = find('PodDisruptionBudget', service.name);
    expect(pdb.spec.selector.matchLabels).toEqual(labels);
    const svc = find('Service', service.name);
    expect(svc.spec.selector).toEqual(labels);
    expect(svc.spec.ports).toEqual([{ name: 'http', port: service.port, targetPort: 'http', protocol: 'TCP' }]);
  });

  it.each(SERVICES)(
    '$name: the heap cap (NODE_OPTIONS) is below the memory limit, and what it holds fits',
    (service) => {
      const container = find('Deployment', service.name).spec.template.spec.containers[0];
      const env = Object.fromEntries(container.env.map((e: Doc) => [e.name, e.value]));
      const heap = heapCapBytes(env.NODE_OPTIONS);
      const limit = quantityBytes(container.resources.limits.memory);
      expect(quantityBytes(container.resources.requests.memory)).toBeLessThanOrEqual(limit);
      // Room outside the V8 heap for buffers, code and native memory: at most 80% of the limit.
      expect(heap).toBeLessThan(limit);
      expect(heap).toBeLessThanOrEqual(limit * 0.8);
      // The image's default is the same cap (a container started without NODE_OPTIONS).
      expect(dockerfileNodeOptions()).toBe(env.NODE_OPTIONS);
      if (service.name === 'session-runner') {
        // Held session states take their default share of the heap limit under this cap (V8's
        // heap_size_limit, read from a node started with the same NODE_OPTIONS): at least 24 MiB,
        // and with both prompt caches at most a sixth of the heap cap, since V8 keeps a heap well
        // above its live data under full-request steps (docs/operations.md#memory).
        expect(env.CTXFLOW_HELD_BYTES).toBeUndefined();
        const heapLimit = Number(
          execFileSync(
            process.execPath,
            [...env.NODE_OPTIONS.split(' '), '-p', "require('node:v8').getHeapStatistics().heap_size_limit"],
            { encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } },
          ).trim(),
        );
        const held = defaultHeldBytes(heapLimit);
        expect(held).toBe(Math.floor(heapLimit / 14));
        expect(held).toBeGreaterThanOrEqual(24 * 2 ** 20);
        expect(held + 2 * DEFAULT_PROMPT_CACHE_BYTES).toBeLessThanOrEqual(heap / 6);
      }
    },
  );

  it.each(SERVICES)(
    '$name: preStop pause, then SIGTERM; the grace period outlasts pause + CTXFLOW_SHUTDOWN_GRACE_MS',
    (service) => {
      const pod = find('Deployment', service.name).spec.template.spec;
      const container = pod.containers[0];
      const config = find('ConfigMap', 'ctxflow-config');
      // The grace the process uses is the ConfigMap's (no Deployment overrides it), parsed as the services do.
      expect(container.env.map((e: Doc) => e.name)).not.toContain('CTXFLOW_SHUTDOWN_GRACE_MS');
      const graceMs = z.object({ g: shutdownGraceVar() }).parse({ g: config.data.CTXFLOW_SHUTDOWN_GRACE_MS }).g;
      expect(graceMs).toBe(DEFAULT_SHUTDOWN_GRACE_MS);
      expect(container.lifecycle.preStop).toEqual({ sleep: { seconds: 5 } });
      const preStopSeconds = container.lifecycle.preStop.sleep.seconds;
      expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(preStopSeconds + graceMs / 1000);
    },
  );

  it('the Secrets hold only clearly marked placeholders: every feed secret, the key file, the service token', () => {
    const secret = find('Secret', 'ctxflow-secrets');
    expect(Object.keys(secret.stringData).sort()).toEqual(FEED_SOURCES.map((source) => feedSecretVar(source)).sort());
    for (const name of ['ctxflow-secrets', 'ctxflow-api-keys', 'ctxflow-service-token']) {
      const doc = find('Secret', name);
      for (const value of Object.values<string>(doc.stringData)) expect(value, name).toContain('REPLACE-ME');
      expect(doc.data, name).toBeUndefined();
    }
    expect(Object.keys(find('Secret', 'ctxflow-api-keys').stringData)).toEqual(['api-keys']);
    expect(Object.keys(find('Secret', 'ctxflow-service-token').stringData)).toEqual(['token']);
  });

  it('each service reads the key file and the service token where its pod mounts them, and starts', () => {
    const config = find('ConfigMap', 'ctxflow-config').data;
    const files = mkdtempSync(join(tmpdir(), 'ctxflow-manifests-'));
    // Each mounted Secret item at its path in the pod, under a temporary root.
    const mounted = (pod: Doc): Record<string, string> => {
      const paths: Record<string, string> = {};
      for (const mount of pod.containers[0].volumeMounts) {
        const volume = pod.volumes.find((v: Doc) => v.name === mount.name);
        if (!volume?.secret || !mount.readOnly) continue;
        const secret = allManifests().find(
          ({ doc }) => doc.kind === 'Secret' && doc.metadata.name === volume.secret.secretName,
        )?.doc;
        if (!secret) continue; // Strimzi's Secrets (the Kafka CA and password) are not in this repository.
        for (const item of volume.secret.items) {
          const path = join(files, mount.mountPath, item.path);
          mkdirSync(dirname(path), { recursive: true });
          writeFileSync(path, secret.stringData[item.key]);
          paths[`${mount.mountPath}/${item.path}`] = path;
        }
      }
      return paths;
    };
    try {
      const envOf = (name: string) => {
        const pod = find('Deployment', name).spec.template.spec;
        const env: Record<string, string> = { ...config, ...find('Secret', 'ctxflow-secrets').stringData };
        for (const e of pod.containers[0].env) if (e.value !== undefined) env[e.name] = e.value;
        const paths = mounted(pod);
        for (const variable of ['CTXFLOW_API_KEYS_FILE', 'CTXFLOW_SERVICE_TOKEN_FILE']) {
          if (env[variable] === undefined || name === 'feed-ingestor') continue;
          expect(paths[env[variable]], `${name} ${variable}`).toBeDefined();
          env[variable] = paths[env[variable]]!;
        }
        // Kafka's and Redis's own files are Strimzi's and yours: not read here.
        for (const variable of ['KAFKA_SSL_CA_FILE', 'KAFKA_SASL_PASSWORD_FILE']) delete env[variable];
        delete env.KAFKA_SSL;
        delete env.KAFKA_SASL_MECHANISM;
        delete env.KAFKA_SASL_USERNAME;
        return env;
      };
      const runner = loadRunnerConfig(envOf('session-runner'));
      expect(runner.identity.keyFile?.entries.map((e) => e.tenant)).toEqual(['tenant-a']);
      expect(runner.serviceTokens).toBeDefined();
      const stepContext = loadStepContextConfig(envOf('step-context'));
      expect(stepContext.serviceTokens).toBeDefined();
      // The feed-ingestor reads no key file (it takes no API callers) and holds no service token.
      const feeds = loadFeedConfig(envOf('feed-ingestor'));
      expect(feeds.secrets.pagerduty).toEqual([{ tenant: 'tenant-a', secret: 'REPLACE-ME-pagerduty-webhook-secret' }]);
      expect(Object.keys(mounted(find('Deployment', 'feed-ingestor').spec.template.spec))).toEqual([]);
      expect(envOf('feed-ingestor').CTXFLOW_SERVICE_TOKEN_FILE).toBeUndefined();
    } finally {
      rmSync(files, { recursive: true, force: true });
    }
  });

  it('topics: the contract topics and their dead-letter topics, 12 partitions, 3 replicas, min.insync.replicas 2', () => {
    const topics = allManifests()
      .filter(({ doc }) => doc.kind === 'KafkaTopic' && doc.spec.topicName !== CONTEXT_ROW_PROGRESS_TOPIC)
      .map(({ doc }) => doc);
    expect(topics.map((t) => t.spec.topicName).sort()).toEqual(Object.values(TOPICS).sort());
    for (const topic of topics) {
      expect(topic.metadata.name).toBe(topic.spec.topicName);
      expect(topic.metadata.labels['strimzi.io/cluster']).toBe('ctxflow');
      expect(topic.spec).toMatchObject({ partitions: 12, replicas: 3, config: { 'min.insync.replicas': 2 } });
    }
  });

  it("the relay's progress topic as the runner creates it: compacted, hourly segments, one partition per shard", () => {
    const topic = find('KafkaTopic', CONTEXT_ROW_PROGRESS_TOPIC);
    expect(topic.metadata.labels['strimzi.io/cluster']).toBe('ctxflow');
    const runner = runnerKafkaSettings();
    expect(topic.spec.topicName).toBe(CONTEXT_ROW_PROGRESS_TOPIC);
    expect(topic.spec.partitions).toBe(runner.contextRowShards);
    expect(topic.spec).toMatchObject({ replicas: 3, config: { 'min.insync.replicas': 2 } });
    const config = Object.fromEntries(Object.entries(topic.spec.config).map(([k, v]) => [k, String(v)]));
    expect(config).toEqual({ 'min.insync.replicas': '2', ...CONTEXT_ROW_PROGRESS_CONFIG });
  });

  it("the KafkaUser's ACLs cover every topic, group and transactional id the services use", () => {
    const user = find('KafkaUser', 'ctxflow');
    expect(aclGaps(user.spec.authorization.acls)).toEqual([]);
    // A copy without the transactional ids, and one whose group ACL lost Delete, are refused.
    const broken = structuredClone(user).spec.authorization.acls.filter(
      (a: Acl) => a.resource.type !== 'transactionalId',
    );
    const shards = runnerKafkaSettings().contextRowShards;
    expect(aclGaps(broken)).toEqual(
      Array.from({ length: shards }, (_, shard) => [
        `transactionalId ctxflow-context-rows-${shard}: Describe`,
        `transactionalId ctxflow-context-rows-${shard}: Write`,
      ]).flat(),
    );
    const noDelete = structuredClone(user).spec.authorization.acls.map((a: Acl) => ({
      ...a,
      operations: a.operations.filter((o) => o !== 'Delete'),
    }));
    expect(aclGaps(noDelete)).toEqual(['group ctxflow-session-runner-last-committed-<uuid>: Delete']);
  });

  it('secured Kafka: the TLS listener as the KafkaUser ctxflow (SCRAM-SHA-512), CA and password mounted from its Secrets', () => {
    const config = find('ConfigMap', 'ctxflow-config');
    // What the services' schemas read (parsed for real: the files are where each pod mounts them).
    expect(config.data).toMatchObject({
      KAFKA_BROKERS: 'ctxflow-kafka-bootstrap:9093',
      KAFKA_SSL: 'true',
      KAFKA_SSL_CA_FILE: '/etc/ctxflow/kafka-ca/ca.crt',
      KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
      KAFKA_SASL_USERNAME: 'ctxflow',
      KAFKA_SASL_PASSWORD_FILE: '/etc/ctxflow/kafka-user/password',
    });
    const user = find('KafkaUser', 'ctxflow');
    expect(user.metadata.labels['strimzi.io/cluster']).toBe('ctxflow');
    expect(user.spec.authentication).toEqual({ type: 'scram-sha-512' });
    // Its ACLs: the test above (aclGaps).
    for (const { name } of SERVICES) {
      const pod = find('Deployment', name).spec.template.spec;
      const mounts = Object.fromEntries(
        pod.containers[0].volumeMounts.map((m: Doc) => [m.name, { path: m.mountPath, readOnly: m.readOnly }]),
      );
      const volumes = Object.fromEntries(pod.volumes.map((v: Doc) => [v.name, v.secret]));
      expect(mounts['kafka-ca'], name).toEqual({ path: '/etc/ctxflow/kafka-ca', readOnly: true });
      expect(mounts['kafka-user'], name).toEqual({ path: '/etc/ctxflow/kafka-user', readOnly: true });
      expect(volumes['kafka-ca'], name).toEqual({
        secretName: 'ctxflow-cluster-ca-cert',
        items: [{ key: 'ca.crt', path: 'ca.crt' }],
      });
      expect(volumes['kafka-user'], name).toEqual({
        secretName: 'ctxflow',
        items: [{ key: 'password', path: 'password' }],
      });
    }
    // KEDA's lag trigger signs in the same way.
    for (const name of ['session-runner', 'step-context']) {
      const trigger = find('ScaledObject', name).spec.triggers[0];
      expect(trigger.metadata).toMatchObject({ sasl: 'scram_sha512', tls: 'enable' });
      expect(trigger.authenticationRef).toEqual({ name: 'ctxflow-kafka' });
    }
    expect(find('TriggerAuthentication', 'ctxflow-kafka').spec).toEqual({
      env: [{ parameter: 'username', name: 'KAFKA_SASL_USERNAME' }],
      secretTargetRef: [
        { parameter: 'password', name: 'ctxflow', key: 'password' },
        { parameter: 'ca', name: 'ctxflow-cluster-ca-cert', key: 'ca.crt' },
      ],
    });
  });

  it('autoscaling: KEDA on consumer lag for the consumers, an HPA on CPU for the feed-ingestor', () => {
    const config = find('ConfigMap', 'ctxflow-config');
    const lagScaled = [
      { name: 'session-runner', group: STEP_CONSUMER_GROUP, topic: TOPICS.stepRequests },
      { name: 'step-context', group: STEP_CONTEXT_GROUP, topic: TOPICS.ticketUpdates },
    ];
    expect(lagScaled.map((s) => s.group)).toEqual(['ctxflow-session-runner', 'ctxflow-step-context']);
    for (const scaled of lagScaled) {
      const so = find('ScaledObject', scaled.name);
      expect(so.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: scaled.name });
      expect(so.spec.triggers).toHaveLength(1);
      expect(so.spec.triggers[0].type).toBe('kafka');
      expect(so.spec.triggers[0].metadata).toMatchObject({
        bootstrapServers: config.data.KAFKA_BROKERS,
        consumerGroup: scaled.group,
        topic: scaled.topic,
      });
      // More consumers than partitions would sit idle.
      expect(so.spec.maxReplicaCount).toBeLessThanOrEqual(12);
      expect(so.spec.minReplicaCount).toBeGreaterThanOrEqual(2);
    }
    const hpa = find('HorizontalPodAutoscaler', 'feed-ingestor');
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'feed-ingestor' });
    expect(hpa.spec.metrics).toEqual([
      { type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 70 } } },
    ]);
  });

  describe('refuses broken copies', () => {
    const copy = <T>(value: T): T => structuredClone(value);

    it('a Deployment without its selector and with a mistyped replica count', () => {
      const broken = copy(find('Deployment', 'session-runner'));
      delete broken.spec.selector;
      broken.spec.replicas = 'two';
      expect(validateManifest(broken, 'broken')).toEqual([
        'broken (apps/v1 Deployment): data/spec must have required property selector, data/spec/replicas must be integer',
      ]);
    });

    it('a misspelled field, which the OpenAPI schema alone would accept', () => {
      const broken = copy(find('Deployment', 'step-context'));
      const container = broken.spec.template.spec.containers[0];
      container.readinesProbe = container.readinessProbe;
      delete container.readinessProbe;
      expect(validateManifest(broken, 'broken')).toEqual([
        'broken (apps/v1 Deployment): unknown field "spec.template.spec.containers[0].readinesProbe"',
      ]);
    });

    it('a KafkaUser with an unknown authentication type and a misspelled spec field', () => {
      const broken = copy(find('KafkaUser', 'ctxflow'));
      broken.spec.authentication.type = 'scram-sha-256';
      broken.spec.authorisation = broken.spec.authorization;
      delete broken.spec.authorization;
      expect(validateManifest(broken, 'broken')).toEqual([
        'broken (kafka.strimzi.io/v1 KafkaUser): /spec must NOT have additional properties, /spec/authentication/type must be equal to one of the allowed values',
      ]);
    });

    it('a KafkaTopic with no partitions and an unknown spec field', () => {
      const broken = copy(find('KafkaTopic', TOPICS.stepRequests));
      broken.spec.partitions = 0;
      broken.spec.replicationFactor = 3;
      expect(validateManifest(broken, 'broken')).toEqual([
        'broken (kafka.strimzi.io/v1 KafkaTopic): /spec must NOT have additional properties, /spec/partitions must be >= 1',
      ]);
    });

    it('a ScaledObject whose trigger has no type, and a kind no schema knows', () => {
      const broken = copy(find('ScaledObject', 'step-context'));
      delete broken.spec.triggers[0].type;
      expect(validateManifest(broken, 'broken')).toEqual([
        'broken (keda.sh/v1alpha1 ScaledObject): data/spec/triggers/0 must have required property type',
      ]);
      expect(validateManifest({ apiVersion: 'apps/v2', kind: 'Deployment' }, 'unknown')).toEqual([
        'unknown: no schema for apiVersion "apps/v2" kind "Deployment"',
      ]);
    });
  });
});

// --- docker-compose.yml --------------------------------------------------------------------

const require = createRequire(import.meta.url);
/** The Compose Specification's schema (compose-spec.json, draft-07) as dclint ships it. */
const { $schema: _draft, ...composeSchema } = JSON.parse(
  readFileSync(join(dirname(require.resolve('dclint/package.json')), 'schemas', 'compose.schema.json'), 'utf8'),
);
// It names draft-07 as `https://json-schema.org/draft-07/schema`, an alias Ajv does not know;
// without `$schema` Ajv uses draft-07, its default.
// strict: false: the schema uses `deprecated` and other annotations Ajv's strict mode rejects.
const validateCompose = new Ajv({ allErrors: true, strict: false }).compile(composeSchema);

function composeProblems(compose: unknown): string[] {
  if (validateCompose(compose)) return [];
  return (validateCompose.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}`);
}

/** The compose file as Compose reads it: YAML merge keys (`<<`) resolved. */
function readCompose(): Doc {
  return parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as Doc;
}

describe('docker-compose.yml', () => {
  it('validates against the Compose Specification schema', () => {
    const compose = readCompose();
    expect(composeProblems(compose)).toEqual([]);
    expect(Object.keys(compose.services).sort()).toEqual(
      ['feed-ingestor', 'kafka', 'otel-collector', 'probe-tools', 'redis', 'session-runner', 'step-context'].sort(),
    );
  });

  it('Kafka is one KRaft node and Redis appends every write to its AOF', () => {
    const { kafka, redis } = readCompose().services;
    expect(kafka.image).toBe('apache/kafka:4.0.0');
    expect(kafka.environment).toMatchObject({
      KAFKA_PROCESS_ROLES: 'broker,controller',
      KAFKA_CONTROLLER_QUORUM_VOTERS: '1@kafka:9093',
      KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: 1,
    });
    expect(redis.image).toBe('redis:7');
    expect(redis.command).toEqual(['redis-server', '--appendonly', 'yes', '--appendfsync', 'everysec']);
  });

  it('every long-running service has a health check; the ctxflow services probe /readyz with node', () => {
    const { services } = readCompose();
    for (const [name, service] of Object.entries<Doc>(services)) {
      if (service.restart === 'no') continue; // a one-shot job
      expect(service.healthcheck?.test?.[0], name).toBe('CMD');
    }
    for (const { name, port, portVar } of SERVICES) {
      const service = services[name];
      expect(service.command).toEqual(['node', `services/${name}/src/main.ts`]);
      expect(service.healthcheck.test).toEqual([
        'CMD',
        'node',
        '-e',
        `fetch('http://127.0.0.1:${port}/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))`,
      ]);
      expect(service.ports).toEqual([`${port}:${port}`]);
      expect(service.environment).toMatchObject({
        [portVar]: port,
        CTXFLOW_HOST: '0.0.0.0',
        KAFKA_BROKERS: 'kafka:9092',
        REDIS_URL: 'redis://redis:6379',
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector:4318',
        OTEL_SERVICE_NAME: `ctxflow-${name}`,
      });
      expect(service.env_file).toEqual(['./deploy/compose.env']);
      expect(service.depends_on).toEqual({
        kafka: { condition: 'service_healthy' },
        redis: { condition: 'service_healthy' },
        'otel-collector': { condition: 'service_healthy' },
      });
    }
    expect(services['session-runner'].environment.CTXFLOW_STEP_CONTEXT_URL).toBe(
      'http://step-context:8082/step-context',
    );
    // step-context calls no other service: it reads a session's owner from the runner's records in Redis.
    expect(services['step-context'].environment).not.toHaveProperty('CTXFLOW_RUNNER_URL');
  });

  it('each ctxflow service: heap cap below mem_limit, stop grace above CTXFLOW_SHUTDOWN_GRACE_MS', () => {
    const { services } = readCompose();
    for (const { name } of SERVICES) {
      const service = services[name];
      const heap = heapCapBytes(service.environment.NODE_OPTIONS);
      const limit = quantityBytes(service.mem_limit);
      expect(heap, name).toBeLessThanOrEqual(limit * 0.8);
      expect(service.environment.NODE_OPTIONS, name).toBe(dockerfileNodeOptions());
      const graceMs = Number(service.environment.CTXFLOW_SHUTDOWN_GRACE_MS);
      expect(graceMs, name).toBe(DEFAULT_SHUTDOWN_GRACE_MS);
      expect(Number(/^(\d+)s$/.exec(service.stop_grace_period)?.[1]) * 1000, name).toBeGreaterThan(graceMs);
    }
  });

  it('the env file gives the API keys and feed secrets, as placeholders', () => {
    const lines = readFileSync(join(ROOT, 'deploy', 'compose.env'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.startsWith('#'));
    const entries = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
    expect(Object.keys(entries).sort()).toEqual(
      ['CTXFLOW_API_KEYS', ...FEED_SOURCES.map((source) => feedSecretVar(source))].sort(),
    );
    expect(entries.CTXFLOW_API_KEYS).toMatch(/^[^:,]+:REPLACE-ME/);
    // With API keys every feed secret names a tenant of those keys, or the services refuse to start.
    expect(() => loadFeedConfig(entries)).not.toThrow();
    expect(() => loadEmbeddedConfig(entries)).not.toThrow();
  });

  it('the collector config wires every pipeline to defined components, health check on the probed port', () => {
    const compose = readCompose();
    const collector = compose.services['otel-collector'];
    expect(collector.volumes).toContain('./deploy/otel-collector.yaml:/etc/otelcol-contrib/config.yaml:ro');
    const config = parse(readFileSync(join(ROOT, 'deploy', 'otel-collector.yaml'), 'utf8')) as Doc;
    expect(Object.keys(config.service.pipelines).sort()).toEqual(['logs', 'metrics', 'traces']);
    for (const [name, pipeline] of Object.entries<Doc>(config.service.pipelines)) {
      for (const section of ['receivers', 'processors', 'exporters'] as const) {
        for (const component of pipeline[section] ?? [])
          expect(config[section], `${name} ${component}`).toHaveProperty([component]);
      }
    }
    // The services export to 4318 (OTLP over HTTP).
    expect(config.receivers.otlp.protocols.http.endpoint).toBe('0.0.0.0:4318');
    expect(config.service.extensions).toEqual(['health_check']);
    const healthPort = config.extensions.health_check.endpoint.split(':')[1];
    expect(collector.healthcheck.test.join(' ')).toContain(`http://127.0.0.1:${healthPort}/`);
  });

  it('refuses a broken copy: a misspelled service key and a health check interval without a unit', () => {
    const broken = readCompose();
    broken.services['feed-ingestor'].helthcheck = broken.services['feed-ingestor'].healthcheck;
    broken.services.redis.healthcheck.interval = 5;
    const problems = composeProblems(broken);
    expect(problems).toContain('/services/feed-ingestor must NOT have additional properties');
    expect(problems).toContain('/services/redis/healthcheck/interval must be string');
  });
});
