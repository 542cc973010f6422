/**
 * deploy/kubernetes as `kubectl kustomize` renders it (kubectl, offline): every rendered object
 * validates against its schema, the generated dashboard ConfigMap carries the dashboard for
 * Grafana's sidecar, the NetworkPolicies let through exactly what the services need, and every
 * pod meets the "restricted" Pod Security Standard the namespace enforces.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { prepareDeclaredFields, ROOT, validateManifest } from './kube-schemas.ts';

type Doc = Record<string, any>;

const run = promisify(execFile);
const KUBECTL = '/usr/bin/kubectl';

let rendered: Doc[] = [];

beforeAll(async () => {
  prepareDeclaredFields();
  const { stdout } = await run(KUBECTL, ['kustomize', join(ROOT, 'deploy', 'kubernetes')]);
  rendered = parseAllDocuments(stdout).map((d) => d.toJS() as Doc);
}, 60_000);

function get(kind: string, name: string): Doc {
  const hit = rendered.find((d) => d.kind === kind && d.metadata.name === name);
  if (!hit) throw new Error(`no ${kind} ${name} in the rendered output`);
  return hit;
}

const matches = (selector: Record<string, string> | undefined, labels: Record<string, string>) =>
  Object.entries(selector ?? {}).every(([k, v]) => labels[k] === v);

/**
 * What the "restricted" Pod Security Standard (Kubernetes docs, "Pod Security Standards",
 * baseline and restricted controls) refuses in one pod spec; empty when it complies.
 */
function restrictedProblems(pod: Doc, where: string): string[] {
  const problems: string[] = [];
  for (const flag of ['hostNetwork', 'hostPID', 'hostIPC']) if (pod[flag]) problems.push(`${where}: ${flag}`);
  const allowedVolumes = new Set([
    'configMap',
    'csi',
    'downwardAPI',
    'emptyDir',
    'ephemeral',
    'persistentVolumeClaim',
    'projected',
    'secret',
  ]);
  for (const volume of pod.volumes ?? []) {
    for (const type of Object.keys(volume).filter((k) => k !== 'name')) {
      if (!allowedVolumes.has(type)) problems.push(`${where}: volume ${volume.name} of type ${type}`);
    }
  }
  const podContext = pod.securityContext ?? {};
  for (const container of [...(pod.initContainers ?? []), ...(pod.containers ?? [])]) {
    const at = `${where} container ${container.name}`;
    const own = container.securityContext ?? {};
    if (own.privileged) problems.push(`${at}: privileged`);
    if (own.allowPrivilegeEscalation !== false) problems.push(`${at}: allowPrivilegeEscalation is not false`);
    if ((own.runAsNonRoot ?? podContext.runAsNonRoot) !== true) problems.push(`${at}: runAsNonRoot is not true`);
    if ((own.runAsUser ?? podContext.runAsUser) === 0) problems.push(`${at}: runAsUser 0`);
    const seccomp = (own.seccompProfile ?? podContext.seccompProfile)?.type;
    if (seccomp !== 'RuntimeDefault' && seccomp !== 'Localhost') problems.push(`${at}: seccompProfile ${seccomp}`);
    if (!own.capabilities?.drop?.includes('ALL')) problems.push(`${at}: capabilities do not drop ALL`);
    for (const added of own.capabilities?.add ?? []) {
      if (added !== 'NET_BIND_SERVICE') problems.push(`${at}: adds capability ${added}`);
    }
    for (const port of container.ports ?? []) if (port.hostPort) problems.push(`${at}: hostPort ${port.hostPort}`);
  }
  return problems;
}

describe('kubectl kustomize deploy/kubernetes', () => {
  it('renders every object valid, in the ctxflow namespace, the monitoring and policy objects among them', () => {
    expect(rendered.flatMap((doc, i) => validateManifest(doc, `rendered#${i}`))).toEqual([]);
    for (const doc of rendered) {
      if (doc.kind !== 'Namespace') expect(doc.metadata.namespace, doc.metadata.name).toBe('ctxflow');
    }
    const kinds = rendered.map((d) => `${d.kind}/${d.metadata.name}`);
    expect(kinds).toEqual(
      expect.arrayContaining([
        'ConfigMap/ctxflow-dashboard',
        'ServiceMonitor/ctxflow',
        'PrometheusRule/ctxflow',
        'NetworkPolicy/default-deny-ingress',
        'NetworkPolicy/session-runner-api',
        'NetworkPolicy/feed-ingestor-webhooks',
        'NetworkPolicy/step-context-from-session-runner',
        'NetworkPolicy/metrics-from-monitoring',
      ]),
    );
  });

  it("the dashboard ConfigMap: the sidecar's label, no name hash, the JSON file unchanged", () => {
    const config = get('ConfigMap', 'ctxflow-dashboard');
    expect(config.metadata.labels).toEqual({ grafana_dashboard: '1', 'app.kubernetes.io/part-of': 'ctxflow' });
    expect(Object.keys(config.data)).toEqual(['ctxflow.json']);
    const file = readFileSync(join(ROOT, 'deploy', 'kubernetes', 'dashboards', 'ctxflow.json'), 'utf8');
    expect(config.data['ctxflow.json']).toBe(file);
  });

  it('the ServiceMonitor scrapes /metrics on the http port of each of the three Services', () => {
    const monitor = get('ServiceMonitor', 'ctxflow');
    expect(monitor.spec.endpoints).toEqual([
      { port: 'http', path: '/metrics', scheme: 'http', interval: '30s', scrapeTimeout: '10s' },
    ]);
    const selected = rendered.filter(
      (d) => d.kind === 'Service' && matches(monitor.spec.selector.matchLabels, d.metadata.labels ?? {}),
    );
    expect(selected.map((s) => s.metadata.name).sort()).toEqual(['feed-ingestor', 'session-runner', 'step-context']);
    for (const service of selected) expect(service.spec.ports.map((p: Doc) => p.name)).toContain('http');
  });

  it('NetworkPolicies: ingress denied by default, then API, hook and metrics traffic from their sources only', () => {
    const policies = rendered.filter((d) => d.kind === 'NetworkPolicy');
    expect(get('NetworkPolicy', 'default-deny-ingress').spec).toEqual({ podSelector: {}, policyTypes: ['Ingress'] });
    // Who may reach each service's http port: [namespace label or pod label] per allowing policy.
    const sources = (podLabels: Record<string, string>) =>
      policies
        .filter((p) => p.spec.ingress && matches(p.spec.podSelector.matchLabels, podLabels))
        .flatMap((p) =>
          p.spec.ingress.flatMap((rule: Doc) => {
            expect(rule.ports).toEqual([{ port: 'http', protocol: 'TCP' }]);
            return rule.from.map((peer: Doc) =>
              peer.namespaceSelector
                ? `namespace ${peer.namespaceSelector.matchLabels['kubernetes.io/metadata.name']}`
                : `pods ${peer.podSelector.matchLabels['app.kubernetes.io/name']}`,
            );
          }),
        )
        .sort();
    const podLabels = (name: string) => get('Deployment', name).spec.template.metadata.labels;
    expect(sources(podLabels('session-runner'))).toEqual(['namespace ingress-nginx', 'namespace monitoring']);
    expect(sources(podLabels('feed-ingestor'))).toEqual(['namespace ingress-nginx', 'namespace monitoring']);
    expect(sources(podLabels('step-context'))).toEqual(['namespace monitoring', 'pods session-runner']);
    // The port the policies name is each container's API and metrics port.
    for (const name of ['session-runner', 'feed-ingestor', 'step-context']) {
      expect(get('Deployment', name).spec.template.spec.containers[0].ports.map((p: Doc) => p.name)).toEqual(['http']);
    }
  });

  it('pod security: the namespace enforces "restricted" and every pod template complies', () => {
    expect(get('Namespace', 'ctxflow').metadata.labels).toMatchObject({
      'pod-security.kubernetes.io/enforce': 'restricted',
      'pod-security.kubernetes.io/audit': 'restricted',
      'pod-security.kubernetes.io/warn': 'restricted',
    });
    const pods = rendered.filter((d) => d.spec?.template?.spec);
    expect(pods.map((d) => d.metadata.name).sort()).toEqual(['feed-ingestor', 'session-runner', 'step-context']);
    expect(pods.flatMap((d) => restrictedProblems(d.spec.template.spec, `${d.kind}/${d.metadata.name}`))).toEqual([]);
  });

  describe('refuses broken copies', () => {
    it('a NetworkPolicy with a mistyped policy type and a misspelled field', () => {
      const broken = structuredClone(get('NetworkPolicy', 'session-runner-api'));
      broken.spec.policyTypes = 'Ingress';
      broken.spec.ingress[0].form = broken.spec.ingress[0].from;
      delete broken.spec.ingress[0].from;
      expect(validateManifest(broken, 'broken')).toEqual([
        'broken (networking.k8s.io/v1 NetworkPolicy): data/spec/policyTypes must be array',
        'broken (networking.k8s.io/v1 NetworkPolicy): unknown field "spec.ingress[0].form"',
      ]);
    });

    it('a ServiceMonitor and a PrometheusRule with wrong types and unknown fields', () => {
      const monitor = structuredClone(get('ServiceMonitor', 'ctxflow'));
      monitor.spec.endpoints = { port: 'http' };
      expect(validateManifest(monitor, 'broken')).toEqual([
        'broken (monitoring.coreos.com/v1 ServiceMonitor): data/spec/endpoints must be array',
        // An object where the declaration has an array: its fields are unknown there too.
        'broken (monitoring.coreos.com/v1 ServiceMonitor): unknown field "spec.endpoints.port"',
      ]);
      const rule = structuredClone(get('PrometheusRule', 'ctxflow'));
      delete rule.spec.groups[0].name;
      rule.spec.groups[0].rules[0].expression = rule.spec.groups[0].rules[0].expr;
      delete rule.spec.groups[0].rules[0].expr;
      expect(validateManifest(rule, 'broken')).toEqual([
        'broken (monitoring.coreos.com/v1 PrometheusRule): data/spec/groups/0 must have required property name, data/spec/groups/0/rules/0 must have required property expr',
        'broken (monitoring.coreos.com/v1 PrometheusRule): unknown field "spec.groups[0].rules[0].expression"',
      ]);
    });

    it('a pod that escalates privileges, runs as root, mounts a host path and keeps its capabilities', () => {
      const pod = structuredClone(get('Deployment', 'step-context').spec.template.spec);
      pod.securityContext = { runAsUser: 0 };
      pod.volumes.push({ name: 'host', hostPath: { path: '/var/run' } });
      pod.containers[0].securityContext = { allowPrivilegeEscalation: true, capabilities: { add: ['NET_ADMIN'] } };
      expect(restrictedProblems(pod, 'broken')).toEqual([
        'broken: volume host of type hostPath',
        'broken container step-context: allowPrivilegeEscalation is not false',
        'broken container step-context: runAsNonRoot is not true',
        'broken container step-context: runAsUser 0',
        'broken container step-context: seccompProfile undefined',
        'broken container step-context: capabilities do not drop ALL',
        'broken container step-context: adds capability NET_ADMIN',
      ]);
    });
  });
});
