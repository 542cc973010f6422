/**
 * Start-time failures of Kafka and Redis that a variable can fix (credentials
 * refused, a certificate not trusted), told as one sentence naming that variable.
 */
import type { TlsFiles } from './connection-security.ts';

/** Node's codes for a peer certificate that is not trusted or does not match the host. */
const UNTRUSTED_CERTIFICATE_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_UNTRUSTED',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_SIGNATURE_FAILURE',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

const UNTRUSTED_CERTIFICATE_TEXT =
  /self[- ]signed certificate|unable to verify the first certificate|unable to get (local )?issuer certificate|certificate has expired|Hostname\/IP does not match certificate/i;

/** Refusals of credentials: Kafka SASL (both clients) and Redis AUTH. */
const REFUSED_CREDENTIALS_TEXT =
  /SASL_AUTHENTICATION_FAILED|SASL \S+ authentication failed|Authentication failed|Invalid username or password|WRONGPASS|NOAUTH/i;

/** Every error inside `err`: itself, its `cause`, `errors`, `originalError`, `lastNodeError`. */
function errorChain(err: unknown): Error[] {
  const seen = new Set<unknown>();
  const out: Error[] = [];
  const visit = (e: unknown, depth: number) => {
    if (typeof e !== 'object' || e === null || seen.has(e) || depth > 10) return;
    seen.add(e);
    if (e instanceof Error) out.push(e);
    const record = e as { cause?: unknown; errors?: unknown; originalError?: unknown; lastNodeError?: unknown };
    visit(record.cause, depth + 1);
    visit(record.originalError, depth + 1);
    visit(record.lastNodeError, depth + 1);
    if (Array.isArray(record.errors)) for (const inner of record.errors) visit(inner, depth + 1);
  };
  visit(err, 0);
  return out;
}

/**
 * A start-time failure of Kafka or Redis that a variable can fix, as a
 * sentence naming that variable; undefined for any other failure.
 */
export function explainConnectionFailure(
  err: unknown,
  what: 'Kafka' | 'Redis',
  security: { names: { credentials: string; ca: string }; tls?: TlsFiles },
): string | undefined {
  const chain = errorChain(err);
  const untrusted = chain.find(
    (e) =>
      UNTRUSTED_CERTIFICATE_CODES.has(String((e as NodeJS.ErrnoException).code)) ||
      UNTRUSTED_CERTIFICATE_TEXT.test(e.message),
  );
  if (untrusted !== undefined) {
    const ca = security.names.ca;
    const given = security.tls?.ca !== undefined;
    return `${ca}: the ${what} server's certificate is not trusted (${untrusted.message})${
      given ? `: is ${ca} the CA that signed it?` : `: set ${ca} to the CA that signed it`
    }`;
  }
  const refused = chain.find((e) => REFUSED_CREDENTIALS_TEXT.test(e.message));
  if (refused !== undefined) {
    return `${security.names.credentials}: ${what} refused the credentials (${refused.message})`;
  }
  return undefined;
}

/**
 * Runs a start step that reaches Kafka or Redis. A failure a variable can fix
 * (credentials refused, certificate not trusted) ends the process with exit
 * code 2 and one line naming the variable; any other failure is rethrown.
 */
export async function connectOrExit<T>(
  service: string,
  what: 'Kafka' | 'Redis',
  security: { names: { credentials: string; ca: string }; tls?: TlsFiles },
  step: () => Promise<T>,
): Promise<T> {
  try {
    return await step();
  } catch (err) {
    const explained = explainConnectionFailure(err, what, security);
    if (explained === undefined) throw err;
    process.stderr.write(`${service}: cannot start: ${explained}\n`);
    process.exit(2);
  }
}
