// Which URLs an endpoint may have. HTTPS only; plain http and every address that is
// not ordinary public unicast (loopback, private, link-local, tunnelling ranges such as
// Teredo and 6to4, NAT64, documentation, reserved...) are refused unless the deployment
// allows them (WEBHOOK_ALLOW_PRIVATE_URLS; on by default outside production, so tests
// and local development can use http://127.0.0.1 receivers). The ports an endpoint may
// name are a setting of their own (WEBHOOK_PORTS). A host name is resolved when the
// endpoint is saved and again when a delivery connects (DNS can change after creation).
// See docs/decisions/webhook-targets.md.
import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/** Inclusive port ranges an endpoint may name; null: any port (but never 0). */
export type PortRanges = ReadonlyArray<readonly [number, number]> | null;

/** Resolves a host name to its addresses (injectable: tests need no network). */
export type Resolver = (hostname: string) => Promise<string[]>;

export const systemResolver: Resolver = async (hostname) =>
  (await dns.promises.lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

/** How long saving an endpoint waits for its host name to resolve. */
export const REGISTRATION_LOOKUP_MS = 2000;

// RFC 4291 2.4 and IANA's IPv6 registry: global unicast is allocated from 2000::/3 only.
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');

/**
 * True for addresses that are not ordinary public unicast: anything ipaddr.js names
 * other than `unicast` (loopback, private, linkLocal, carrierGradeNat, reserved,
 * multicast, teredo, 6to4, rfc6052, rfc6145, uniqueLocal, ...), after unwrapping an
 * IPv4-mapped IPv6 address; IPv6 also outside 2000::/3 (IPv4-compatible ::/96 and
 * other unallocated space). Anything that does not parse is refused.
 */
export function isPrivateAddress(address: string): boolean {
  if (!net.isIP(address)) return true;
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    ip = ipaddr.process(address);
  } catch {
    return true;
  }
  if (ip.range() !== 'unicast') return true;
  return ip.kind() === 'ipv6' && !ip.match(GLOBAL_UNICAST_V6);
}

/** The port a URL connects to (its scheme's default when it names none). */
export function urlPort(url: URL): number {
  if (url.port !== '') return Number(url.port);
  return url.protocol === 'http:' ? 80 : 443;
}

/** Null when the port may be named, else the reason. */
export function portProblem(url: URL, ports: PortRanges): string | null {
  const port = urlPort(url);
  if (port === 0) return 'must not name port 0';
  if (ports === null || ports.some(([lo, hi]) => port >= lo && port <= hi)) return null;
  return `must not name port ${port} (allowed: ${ports.map(([lo, hi]) => (lo === hi ? `${lo}` : `${lo}-${hi}`)).join(', ')})`;
}

/** Null when acceptable, else the reason (for a 422 detail). Syntax, scheme, port and literal addresses only; no lookup. */
export function endpointUrlProblem(text: string, allowPrivate: boolean, ports: PortRanges = null): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an absolute URL';
  }
  if (text.length > 2048) return 'must be at most 2048 characters';
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) return 'must be an https URL';
  if (url.hash) return 'must not have a fragment';
  const port = portProblem(url, ports);
  if (port) return port;
  if (allowPrivate) return null;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host)) return isPrivateAddress(host) ? 'must not point to a private, loopback or special-purpose address' : null;
  const lower = host.toLowerCase().replace(/\.+$/, ''); // "LOCALHOST." is localhost
  if (lower === 'localhost' || lower.endsWith('.localhost') || lower.endsWith('.local') || lower.endsWith('.internal') || !lower.includes('.')) {
    return 'must name a public host';
  }
  return null;
}

/**
 * endpointUrlProblem, then (private addresses refused) the host name resolved: a name
 * with any refused address is refused. A name that does not resolve within
 * REGISTRATION_LOOKUP_MS is accepted: the send-time check refuses whatever it resolves
 * to later. The refusal does not say which address a name resolved to.
 */
export async function endpointTargetProblem(text: string, rules: { allowPrivate: boolean; ports: PortRanges },
  resolve: Resolver = systemResolver, timeoutMs = REGISTRATION_LOOKUP_MS): Promise<string | null> {
  const problem = endpointUrlProblem(text, rules.allowPrivate, rules.ports);
  if (problem || rules.allowPrivate) return problem;
  const host = new URL(text).hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host)) return null;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((r) => { timer = setTimeout(() => r(null), timeoutMs); });
  try {
    const addresses = await Promise.race([resolve(host.replace(/\.+$/, '')), timeout]);
    if (addresses?.some((a) => isPrivateAddress(a))) return 'must name a host whose addresses are public (it resolves to a private, loopback or special-purpose address)';
    return null;
  } catch {
    return null;
  } finally {
    clearTimeout(timer);
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

/** A dns.lookup for http.Agent that refuses non-public addresses (connect-time check). */
export function publicOnlyLookup(hostname: string, options: dns.LookupOptions, callback: LookupCallback): void {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, '');
    const list = addresses as dns.LookupAddress[];
    const bad = list.find((a) => isPrivateAddress(a.address));
    if (bad || list.length === 0) {
      const e = new Error(`refused to connect to non-public address ${bad?.address ?? '(none)'}`) as NodeJS.ErrnoException;
      e.code = 'EADDRNOTPUBLIC';
      return callback(e, '');
    }
    if (options.all) return callback(null, list);
    callback(null, list[0].address, list[0].family);
  });
}
