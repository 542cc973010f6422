/**
 * Secured services made by a test: certificates from a throwaway CA (openssl),
 * a private Kafka broker with a SASL_SSL listener (PLAIN, SCRAM-SHA-256,
 * SCRAM-SHA-512, OAUTHBEARER with the broker's unsecured JWT validator) and an
 * SSL listener that requires a client certificate, and redis-server on TLS
 * only with an ACL user (standalone, or a three-node Cluster). All on free
 * loopback ports, under a temporary folder; `stop()` ends them.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { PrivateKafka } from '../faults/kafka-broker.ts';
import { freePort, waitFor } from '../faults/processes.ts';

export interface Certificates {
  dir: string;
  /** The CA that signed the server and client certificates. */
  caFile: string;
  ca: string;
  /** Another CA, which signed nothing here: trusting only it means the servers are untrusted. */
  otherCaFile: string;
  serverCertFile: string;
  serverKeyFile: string;
  clientCertFile: string;
  clientKeyFile: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A CA, a server certificate for 127.0.0.1 and localhost, a client certificate, and an unrelated CA (EC P-256). */
export function makeCertificates(dir: string): Certificates {
  mkdirSync(dir, { recursive: true });
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '2'];
  for (const name of ['ca', 'other-ca']) {
    openssl(
      [
        'req',
        '-x509',
        ...key,
        '-keyout',
        `${name}.key`,
        '-out',
        `${name}.pem`,
        '-subj',
        `/CN=ctxflow test ${name}`,
        '-addext',
        'basicConstraints=critical,CA:TRUE',
        '-addext',
        'keyUsage=critical,keyCertSign,cRLSign',
      ],
      dir,
    );
  }
  const leaf = (name: string, cn: string, usage: string, san?: string) =>
    openssl(
      [
        'req',
        '-x509',
        ...key,
        '-CA',
        'ca.pem',
        '-CAkey',
        'ca.key',
        '-keyout',
        `${name}.key`,
        '-out',
        `${name}.pem`,
        '-subj',
        `/CN=${cn}`,
        '-addext',
        'basicConstraints=critical,CA:FALSE',
        '-addext',
        `extendedKeyUsage=${usage}`,
        ...(san ? ['-addext', `subjectAltName=${san}`] : []),
      ],
      dir,
    );
  leaf('server', 'localhost', 'serverAuth,clientAuth', 'IP:127.0.0.1,DNS:localhost');
  leaf('client', 'ctxflow-client', 'clientAuth');
  return {
    dir,
    caFile: join(dir, 'ca.pem'),
    ca: readFileSync(join(dir, 'ca.pem'), 'utf8'),
    otherCaFile: join(dir, 'other-ca.pem'),
    serverCertFile: join(dir, 'server.pem'),
    serverKeyFile: join(dir, 'server.key'),
    clientCertFile: join(dir, 'client.pem'),
    clientKeyFile: join(dir, 'client.key'),
  };
}

/** An unsigned JWT (`alg: none`) as Kafka's unsecured OAUTHBEARER validator accepts it. */
export function unsecuredJwt(subject: string, lifetimeS = 3_600): string {
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const now = Math.floor(Date.now() / 1000);
  return `${part({ alg: 'none' })}.${part({ sub: subject, iat: now, exp: now + lifetimeS })}.`;
}

export interface SecuredKafka {
  kafka: PrivateKafka;
  /** Bootstrap list of the SASL_SSL listener. */
  saslSslBrokers: string[];
  /** Bootstrap list of the SSL listener (a client certificate is required). */
  sslBrokers: string[];
  /** The user known to PLAIN and both SCRAM mechanisms, and its password. */
  username: string;
  password: string;
}

/** One KRaft node with a SASL_SSL and an SSL listener, the server certificate as a PEM key store. */
export async function startSecuredKafka(name: string, certs: Certificates): Promise<SecuredKafka> {
  const username = 'ctxflow';
  const password = `kafka-${randomBytes(12).toString('hex')}`;
  // A PEM key store holds the private key and the certificate chain in one file.
  const keystore = join(certs.dir, 'kafka-keystore.pem');
  writeFileSync(
    keystore,
    readFileSync(certs.serverKeyFile, 'utf8') + readFileSync(certs.serverCertFile, 'utf8') + certs.ca,
  );
  const kafka = await PrivateKafka.start({
    name,
    listeners: [
      { name: 'SASL_SSL', protocol: 'SASL_SSL' },
      { name: 'SSL', protocol: 'SSL' },
    ],
    extra: [
      'sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER',
      `listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_${username}="${password}";`,
      'listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;',
      'listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;',
      'listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;',
      'ssl.keystore.type=PEM',
      `ssl.keystore.location=${keystore}`,
      'ssl.truststore.type=PEM',
      `ssl.truststore.location=${certs.caFile}`,
      'listener.name.ssl.ssl.client.auth=required',
    ],
    formatArgs: [
      '--add-scram',
      `SCRAM-SHA-256=[name=${username},password=${password}]`,
      '--add-scram',
      `SCRAM-SHA-512=[name=${username},password=${password}]`,
    ],
  });
  return {
    kafka,
    saslSslBrokers: kafka.listenerBrokers('SASL_SSL'),
    sslBrokers: kafka.listenerBrokers('SSL'),
    username,
    password,
  };
}

export interface SecuredRedis {
  /** `rediss://127.0.0.1:<port>` (no credentials in it). */
  url: string;
  /** `host:port` of every node of a Cluster; one entry for a standalone server. */
  nodes: string[];
  username: string;
  password: string;
  stop(): Promise<void>;
}

/**
 * redis-server on TLS only (`--port 0`), the default user off and one ACL
 * user with every right; with `cluster`, three such nodes made into a Cluster
 * whose bus is on TLS too.
 */
export async function startSecuredRedis(
  certs: Certificates,
  options: { cluster?: boolean } = {},
): Promise<SecuredRedis> {
  const username = 'ctxflow-app';
  const password = `redis-${randomBytes(12).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'ctxflow-tls-redis-'));
  const count = options.cluster ? 3 : 1;
  const ports: number[] = [];
  const children: ChildProcess[] = [];
  const stop = async () => {
    await Promise.all(
      children.map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const gone = new Promise((r) => child.once('exit', r));
        child.kill('SIGKILL');
        await gone;
      }),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < count; i++) {
      // A cluster node's bus listens on port + 10000: keep it below 65536.
      let port = await freePort();
      while (options.cluster && port > 55_000) port = await freePort();
      ports.push(port);
      const nodeDir = join(dir, String(port));
      mkdirSync(nodeDir);
      const child = spawn(
        'redis-server',
        [
          '--port',
          '0',
          '--tls-port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--dir',
          nodeDir,
          '--save',
          '',
          '--appendonly',
          'no',
          '--tls-cert-file',
          certs.serverCertFile,
          '--tls-key-file',
          certs.serverKeyFile,
          '--tls-ca-cert-file',
          certs.caFile,
          '--tls-auth-clients',
          'optional',
          '--user',
          'default',
          'off',
          '--user',
          username,
          'on',
          `>${password}`,
          '~*',
          '&*',
          '+@all',
          ...(options.cluster
            ? [
                '--cluster-enabled',
                'yes',
                '--cluster-config-file',
                'nodes.conf',
                '--tls-cluster',
                'yes',
                '--masteruser',
                username,
                '--masterauth',
                password,
              ]
            : []),
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      children.push(child);
    }
    const nodes = ports.map((port) => `127.0.0.1:${port}`);
    const tls = { ca: certs.ca };
    for (const port of ports) {
      await waitFor(
        `TLS redis-server on ${port}`,
        async () => {
          const probe = new Redis({
            port,
            host: '127.0.0.1',
            tls,
            username,
            password,
            lazyConnect: true,
            maxRetriesPerRequest: 0,
            retryStrategy: () => null,
          });
          probe.on('error', () => {});
          try {
            return (await probe.ping()) === 'PONG';
          } finally {
            probe.disconnect();
          }
        },
        15_000,
        100,
      );
    }
    if (options.cluster) {
      execFileSync(
        'redis-cli',
        [
          '--tls',
          '--cacert',
          certs.caFile,
          '--user',
          username,
          '--pass',
          password,
          '--no-auth-warning',
          '--cluster',
          'create',
          ...nodes,
          '--cluster-replicas',
          '0',
          '--cluster-yes',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      await waitFor(
        'the TLS Redis Cluster',
        async () => {
          const infos = await Promise.all(
            ports.map((port) => {
              const node = new Redis({ port, host: '127.0.0.1', tls, username, password, lazyConnect: true });
              return node.cluster('INFO').finally(() => node.disconnect());
            }),
          );
          return infos.every((info) => String(info).includes('cluster_state:ok'));
        },
        30_000,
        200,
      );
    }
    return { url: `rediss://127.0.0.1:${ports[0]}`, nodes, username, password, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
