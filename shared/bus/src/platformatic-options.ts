/**
 * The client options every @platformatic/kafka client of the bus starts from
 * (the platformatic adapter's producer, admin and consumers, and the kafkajs
 * adapter's log describer): brokers, timeouts, retries, TLS and SASL.
 */

import { isIP } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import type { SASLOptions } from '@platformatic/kafka';
import type { ResolvedKafkaBusOptions } from './kafka-options.ts';

export function baseOptions(options: ResolvedKafkaBusOptions) {
  return {
    clientId: options.clientId,
    bootstrapBrokers: options.brokers,
    connectTimeout: options.connectTimeoutMs,
    timeout: options.requestTimeoutMs,
    retries: options.retries,
    ...platformaticSecurity(options),
  };
}

/**
 * The client's `tls` (tls.connect options), `tlsServerName` and `sasl`
 * (upper-case mechanism names). SNI carries the broker's host name (hosted
 * clusters route on it); an IP address is never sent as a server name (RFC 6066).
 */
function platformaticSecurity({ tls, sasl, brokers }: ResolvedKafkaBusOptions) {
  const security: { tls?: ConnectionOptions; tlsServerName?: boolean; sasl?: SASLOptions } = {};
  if (tls !== undefined) {
    security.tls = { ...tls, rejectUnauthorized: true };
    const host = brokers[0]?.slice(0, brokers[0].lastIndexOf(':')) ?? '';
    if (isIP(host) === 0) security.tlsServerName = true;
  }
  if (sasl?.mechanism === 'oauthbearer') {
    security.sasl = { mechanism: 'OAUTHBEARER', token: sasl.token };
  } else if (sasl !== undefined) {
    const mechanism =
      sasl.mechanism === 'plain' ? 'PLAIN' : sasl.mechanism === 'scram-sha-256' ? 'SCRAM-SHA-256' : 'SCRAM-SHA-512';
    security.sasl = { mechanism, username: sasl.username, password: sasl.password };
  }
  return security;
}
