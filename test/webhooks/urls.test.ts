// Where deliveries may go when private URLs are not allowed (production default):
// the rule is checked when an endpoint is saved and again when its host is resolved.
import { createSender } from '../../src/webhooks/send';
import { decryptSecret, encryptSecret, parseEncryptionKey } from '../../src/webhooks/crypto';
import { endpointUrlProblem, isPrivateAddress } from '../../src/webhooks/urls';

test('loopback, private, link-local, CGNAT and mapped addresses are not public; others are', () => {
  for (const a of ['127.0.0.1', '10.0.0.1', '172.16.5.4', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0',
    '::1', '::', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '::ffff:10.1.1.1']) {
    expect([a, isPrivateAddress(a)]).toEqual([a, true]);
  }
  for (const a of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
    expect([a, isPrivateAddress(a)]).toEqual([a, false]);
  }
});

test('only https URLs to public hosts are accepted unless private URLs are allowed', () => {
  expect(endpointUrlProblem('https://hooks.example.com/x', false)).toBeNull();
  expect(endpointUrlProblem('http://hooks.example.com/x', false)).toMatch(/https/);
  expect(endpointUrlProblem('https://intranet/x', false)).toMatch(/public host/);
  expect(endpointUrlProblem('https://hooks.example.com/x#frag', false)).toMatch(/fragment/);
  expect(endpointUrlProblem('http://127.0.0.1:8080/x', true)).toBeNull();
  expect(endpointUrlProblem('ftp://127.0.0.1/x', true)).toMatch(/https/);
});

test('at send time a host name that resolves to a private address is refused before connecting', async () => {
  const sender = createSender({ allowPrivate: false, timeoutMs: 2000 });
  try {
    const r = await sender.post('https://localhost:9/hook', {}, '{}');
    expect(r).toMatchObject({ ok: false, status_code: null });
    expect(r.error).toMatch(/non-public address/);
    const plain = await sender.post('http://hooks.example.com/hook', {}, '{}');
    expect(plain.error).toBe('URL scheme not allowed');
  } finally {
    sender.close();
  }
});

test('secret ciphertexts are bound to their endpoint and key', () => {
  const key = parseEncryptionKey('11'.repeat(32));
  expect(parseEncryptionKey(Buffer.alloc(32, 0x11).toString('base64'))).toEqual(key);
  expect(() => parseEncryptionKey('too short')).toThrow(/32 bytes/);
  const c = encryptSecret(key, 'com_a', 'we_1', 'whsec_abc');
  expect(decryptSecret(key, 'com_a', 'we_1', c)).toBe('whsec_abc');
  expect(() => decryptSecret(key, 'com_a', 'we_2', c)).toThrow();
  expect(() => decryptSecret(parseEncryptionKey('22'.repeat(32)), 'com_a', 'we_1', c)).toThrow();
});
