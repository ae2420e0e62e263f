// Audit item 7: the address rule holds for IP literals at send time (the lookup hook
// never sees them), and registration refuses the disguised forms of private hosts.
// Issue 27 item 7: only ordinary public unicast (ipaddr.js's `unicast`, IPv4-mapped
// unwrapped) is a target, so tunnelling ranges (Teredo, 6to4) and every other special
// range are refused; in production only ports 80, 443 and above 1023 (WEBHOOK_PORTS);
// a host name is resolved when the endpoint is saved (through an injected resolver
// here: no network) and again at send time; a redirect is never followed.
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { DEFAULT_WEBHOOK_PORTS, loadConfig, webhookPortsSetting } from '../../src/core/config';
import { createServices } from '../../src/app';
import { createWebhookService } from '../../src/webhooks';
import { createSender } from '../../src/webhooks/send';
import { endpointTargetProblem, endpointUrlProblem, isPrivateAddress, Resolver } from '../../src/webhooks/urls';
import { call, createTenant, startApp } from '../support/app';
import { ENCRYPTION_KEY } from '../support/webhooks';

test('registration refuses LOCALHOST., IPv4-compatible, translated, site-local and 6to4-private forms', () => {
  for (const url of ['https://LOCALHOST./x', 'https://localhost../x', 'https://[::127.0.0.1]/x', 'https://[::ffff:0:7f00:1]/x',
    'https://[::ffff:127.0.0.1]/x', 'https://[::ffff:7f00:1]/x', 'https://[fec0::1]/x', 'https://[2002:7f00:1::]/x',
    'https://[2002:c0a8:101::1]/x', 'https://[2002:a00:1::]/x', 'https://[::a00:1]/x']) {
    expect([url, endpointUrlProblem(url, false)]).toEqual([url, expect.any(String)]);
  }
  for (const url of ['https://hooks.example.com/x', 'https://[2606:4700:4700::1111]/x', 'https://8.8.8.8/x', 'https://[::ffff:8.8.8.8]/x']) {
    expect([url, endpointUrlProblem(url, false)]).toEqual([url, null]);
  }
  expect(isPrivateAddress('::ffff:0:a00:1')).toBe(true);
});

test('only public unicast is a target: Teredo, 6to4, NAT64 and every other special-purpose range are refused', () => {
  const refused = [
    '2001:0:4136:e378:8000:63bf:3fff:fdd2', // Teredo 2001::/32 (embeds any IPv4, public or not)
    '2001::1',
    '2002:808:808::1', '2002:5db8:d822::1', // 6to4 2002::/16, even around a public IPv4
    '64:ff9b::808:808', '64:ff9b:1::1', // NAT64 (rfc6052)
    '::ffff:0:808:808', // rfc6145 translated
    '2001:db8::1', '3fff::1', '2001:2::1', '2001:10::1', '2001:20::1', '5f00::1', '100::1', // reserved, benchmarking, orchid, segment routing, discard
    'ff02::1', 'fe80::1', 'fec0::1', 'fd12:3456::1', '::', '::1', '::808:808', '4000::1',
    '255.255.255.255', '224.0.0.1', '240.0.0.1', '192.88.99.1', '192.0.0.8', '198.18.0.1', '100.64.0.1',
    '192.52.193.1', '192.175.48.1', '0.1.2.3', '::ffff:10.0.0.1', '::ffff:169.254.169.254', 'not-an-address',
  ];
  for (const a of refused) expect([a, isPrivateAddress(a)]).toEqual([a, true]);
  for (const a of ['8.8.8.8', '93.184.216.34', '2606:4700:4700::1111', '2a00:1450:4001::1', '::ffff:8.8.8.8']) {
    expect([a, isPrivateAddress(a)]).toEqual([a, false]);
  }
  expect(endpointUrlProblem('https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/x', false)).toMatch(/special-purpose/);
});

const PRODUCTION_PORTS = webhookPortsSetting(undefined, true);

test('in production only ports 80, 443 and above 1023 are allowed (WEBHOOK_PORTS), at registration', () => {
  expect(loadConfig({ NODE_ENV: 'production' }).webhookPorts).toEqual(PRODUCTION_PORTS);
  expect(PRODUCTION_PORTS).toEqual([[80, 80], [443, 443], [1024, 65535]]);
  expect(DEFAULT_WEBHOOK_PORTS).toBe('80,443,1024-65535');
  for (const url of ['https://hooks.example.com:0/x', 'https://hooks.example.com:22/x', 'https://hooks.example.com:25/x',
    'https://hooks.example.com:1023/x', 'https://8.8.8.8:110/x']) {
    expect([url, endpointUrlProblem(url, false, PRODUCTION_PORTS)]).toEqual([url, expect.stringMatching(/port/)]);
  }
  for (const url of ['https://hooks.example.com/x', 'https://hooks.example.com:443/x', 'https://hooks.example.com:80/x',
    'https://hooks.example.com:1024/x', 'https://hooks.example.com:8443/x', 'https://hooks.example.com:65535/x']) {
    expect([url, endpointUrlProblem(url, false, PRODUCTION_PORTS)]).toEqual([url, null]);
  }
  // Configurable; "any" still never allows port 0. Outside production: any port.
  expect(webhookPortsSetting('443, 8000-8999', true)).toEqual([[443, 443], [8000, 8999]]);
  expect(endpointUrlProblem('https://hooks.example.com:8080/x', false, webhookPortsSetting('443, 8000-8999', true))).toBeNull();
  expect(endpointUrlProblem('https://hooks.example.com:9000/x', false, webhookPortsSetting('443, 8000-8999', true))).toMatch(/port 9000/);
  expect(webhookPortsSetting('any', true)).toBeNull();
  expect(webhookPortsSetting(undefined, false)).toBeNull();
  expect(endpointUrlProblem('https://hooks.example.com:0/x', true, null)).toMatch(/port 0/);
  for (const bad of ['0', '22-21', '70000', 'http', '80,,443', '1-2-3']) expect(() => webhookPortsSetting(bad, true)).toThrow(/WEBHOOK_PORTS/);
});

/** A resolver answering from a table, as DNS would; a name it lacks does not exist. */
function tableResolver(table: Record<string, string[]>): Resolver & { asked: string[] } {
  const asked: string[] = [];
  const resolve = async (host: string) => {
    asked.push(host);
    const found = table[host];
    if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return found;
  };
  return Object.assign(resolve, { asked });
}

const NAMES = {
  'loopback.hooks.test': ['127.0.0.1'],
  'metadata.hooks.test': ['169.254.169.254'],
  'teredo.hooks.test': ['2001:0:4136:e378:8000:63bf:3fff:fdd2'],
  'mixed.hooks.test': ['93.184.216.34', '10.0.0.7'],
  'mapped.hooks.test': ['::ffff:127.0.0.1'],
  'public.hooks.test': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
};

test('registration resolves the host name and refuses one with any refused address (an injected resolver: no network)', async () => {
  const resolve = tableResolver(NAMES);
  const rules = { allowPrivate: false, ports: PRODUCTION_PORTS };
  for (const host of ['loopback.hooks.test', 'metadata.hooks.test', 'teredo.hooks.test', 'mixed.hooks.test', 'mapped.hooks.test', 'LOOPBACK.hooks.test.']) {
    const problem = await endpointTargetProblem(`https://${host}/x`, rules, resolve);
    expect([host, problem]).toEqual([host, expect.stringMatching(/resolves to a private, loopback or special-purpose address/)]);
    // The refusal does not tell the caller what the name resolves to.
    expect(problem).not.toMatch(/127\.|169\.254|10\.0|2001:/);
  }
  expect(await endpointTargetProblem('https://public.hooks.test/x', rules, resolve)).toBeNull();
  // A name that does not resolve (yet) is left to the send-time check; so is a slow resolver.
  expect(await endpointTargetProblem('https://nowhere.hooks.test/x', rules, resolve)).toBeNull();
  const slow: Resolver = () => new Promise(() => {});
  expect(await endpointTargetProblem('https://slow.hooks.test/x', rules, slow, 50)).toBeNull();
  // Private URLs allowed (development): nothing is resolved.
  const before = resolve.asked.length;
  expect(await endpointTargetProblem('https://loopback.hooks.test/x', { allowPrivate: true, ports: null }, resolve)).toBeNull();
  expect(resolve.asked.length).toBe(before);
});

test('the API refuses, with 422 on url, an endpoint whose name resolves to loopback or names a refused port, on create and update', async () => {
  const resolve = tableResolver(NAMES);
  const strict = await startApp(
    { webhookEncryptionKey: ENCRYPTION_KEY, webhookAllowPrivateUrls: false, webhookPorts: PRODUCTION_PORTS }, {},
    { services: (config) => ({ ...createServices(config), webhooks: createWebhookService({ encryptionKey: ENCRYPTION_KEY, allowPrivateUrls: false, ports: config.webhookPorts, resolve }) }) },
  );
  try {
    const t = await createTenant(strict.owner);
    for (const url of ['https://loopback.hooks.test/hook', 'https://mixed.hooks.test/hook', 'https://teredo.hooks.test/hook',
      'https://public.hooks.test:22/hook', 'https://public.hooks.test:0/hook', 'https://[2001::1]/hook', 'https://[2002:808:808::1]/hook']) {
      const r = await call(strict.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url } });
      expect([url, r.status, r.body.code, r.body.param]).toEqual([url, 422, 'invalid_request', 'url']);
    }
    const ok = await call(strict.url, 'POST', '/v1/webhooks/endpoints', { key: t.key, body: { url: 'https://public.hooks.test:8443/hook' } });
    expect(ok.status).toBe(201);
    const patch = await call(strict.url, 'PATCH', `/v1/webhooks/endpoints/${ok.body.id}`, { key: t.key, body: { url: 'https://metadata.hooks.test/latest' } });
    expect([patch.status, patch.body.param]).toEqual([422, 'url']);
    expect(resolve.asked).toEqual(expect.arrayContaining(['loopback.hooks.test', 'public.hooks.test', 'metadata.hooks.test']));
  } finally {
    await strict.close();
  }
});

test('at send time a refused port is never connected to, whatever was saved', async () => {
  let connections = 0;
  const receiver = net.createServer((socket) => { connections++; socket.destroy(); });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const { port } = receiver.address() as AddressInfo;
  const sender = createSender({ allowPrivate: true, ports: [[443, 443]], timeoutMs: 2000 });
  try {
    const r = await sender.post(`http://127.0.0.1:${port}/hook`, {}, '{}');
    expect(r).toMatchObject({ ok: false, status_code: null });
    expect(r.error).toMatch(new RegExp(`port ${port}`));
    expect(connections).toBe(0);
  } finally {
    sender.close();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  }
});

test('a redirect is never followed: the 3xx is a failed attempt and its Location gets no request', async () => {
  let followed = 0;
  const target = http.createServer((_req, res) => { followed++; res.end('ok'); });
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  const targetPort = (target.address() as AddressInfo).port;
  const redirector = http.createServer((_req, res) => {
    res.writeHead(307, { location: `http://127.0.0.1:${targetPort}/internal` }).end();
  });
  await new Promise<void>((resolve) => redirector.listen(0, '127.0.0.1', resolve));
  const sender = createSender({ allowPrivate: true, timeoutMs: 2000 });
  try {
    const r = await sender.post(`http://127.0.0.1:${(redirector.address() as AddressInfo).port}/hook`, {}, '{}');
    expect(r).toMatchObject({ ok: false, status_code: 307 });
    expect(followed).toBe(0);
  } finally {
    sender.close();
    await new Promise<void>((resolve) => redirector.close(() => resolve()));
    await new Promise<void>((resolve) => target.close(() => resolve()));
  }
});

test('in production a delivery to an IP-literal endpoint saved while private URLs were allowed never connects', async () => {
  let connections = 0;
  const receiver = net.createServer((socket) => { connections++; socket.destroy(); });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const { port } = receiver.address() as AddressInfo;
  // Saved while allowed (development), delivered by a production worker.
  expect(endpointUrlProblem(`https://127.0.0.1:${port}/hook`, true)).toBeNull();
  const sender = createSender({ allowPrivate: false, timeoutMs: 2000 });
  try {
    for (const url of [`https://127.0.0.1:${port}/hook`, `https://[::ffff:127.0.0.1]:${port}/hook`]) {
      const r = await sender.post(url, {}, '{}');
      expect(r).toMatchObject({ ok: false, status_code: null });
      expect(r.error).toMatch(/non-public address/);
    }
    expect(connections).toBe(0);
  } finally {
    sender.close();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  }
});
