// Which URLs an endpoint may have. HTTPS only; plain http, loopback, private,
// link-local and other non-public addresses are refused unless the deployment allows
// them (WEBHOOK_ALLOW_PRIVATE_URLS; on by default outside production, so tests and
// local development can use http://127.0.0.1 receivers). The same rule is applied
// again when the host name is resolved at send time (DNS can change after creation).
import dns from 'node:dns';
import net from 'node:net';

const blocked = new net.BlockList();
for (const [prefix, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16],
  ['172.16.0.0', 12], ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15],
  ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(prefix, bits, 'ipv4');
for (const [prefix, bits] of [
  ['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8], ['64:ff9b::', 96],
  ['64:ff9b:1::', 48], ['100::', 64], ['2001:db8::', 32],
] as const) blocked.addSubnet(prefix, bits, 'ipv6');

/** The eight 16-bit groups of an IPv6 address (any textual form, dotted tail included). */
function ipv6Groups(address: string): number[] {
  let text = address.toLowerCase();
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number);
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, null];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const fill = tail === null ? [] : Array(8 - left.length - right.length).fill('0');
  return [...left, ...fill, ...right].map((g) => parseInt(g, 16));
}

/** The IPv4 address an IPv6 one embeds (mapped, translated, compatible, 6to4), or null. */
function embeddedIpv4(groups: number[]): string | null {
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zeros = (from: number, to: number) => groups.slice(from, to).every((g) => g === 0);
  if (zeros(0, 5) && groups[5] === 0xffff) return v4(groups[6], groups[7]);          // ::ffff:0:0/96 mapped
  if (zeros(0, 4) && groups[4] === 0xffff && groups[5] === 0) return v4(groups[6], groups[7]); // ::ffff:0:0:0/96 translated
  if (zeros(0, 6)) return v4(groups[6], groups[7]);                                   // ::/96 compatible (:: and ::1 too)
  if (groups[0] === 0x2002) return v4(groups[1], groups[2]);                          // 6to4 2002::/16
  return null;
}

/** True for addresses that are not on the public internet. */
export function isPrivateAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family === 6) {
    const groups = ipv6Groups(address);
    const v4 = embeddedIpv4(groups);
    if (v4 !== null) return v4 === '0.0.0.0' || v4 === '0.0.0.1' || blocked.check(v4, 'ipv4');
    return blocked.check(address, 'ipv6');
  }
  return true;
}

/** Null when acceptable, else the reason (for a 422 detail). */
export function endpointUrlProblem(text: string, allowPrivate: boolean): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an absolute URL';
  }
  if (text.length > 2048) return 'must be at most 2048 characters';
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) return 'must be an https URL';
  if (url.hash) return 'must not have a fragment';
  if (allowPrivate) return null;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (net.isIP(host)) return isPrivateAddress(host) ? 'must not point to a private or loopback address' : null;
  const lower = host.toLowerCase().replace(/\.+$/, ''); // "LOCALHOST." is localhost
  if (lower === 'localhost' || lower.endsWith('.localhost') || lower.endsWith('.local') || lower.endsWith('.internal') || !lower.includes('.')) {
    return 'must name a public host';
  }
  return null;
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
