// Audit item 7: the address rule holds for IP literals at send time (the lookup hook
// never sees them), and registration refuses the disguised forms of private hosts.
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { createSender } from '../../src/webhooks/send';
import { endpointUrlProblem, isPrivateAddress } from '../../src/webhooks/urls';

test('registration refuses LOCALHOST., IPv4-compatible, translated, site-local and 6to4-private forms', () => {
  for (const url of ['https://LOCALHOST./x', 'https://localhost../x', 'https://[::127.0.0.1]/x', 'https://[::ffff:0:7f00:1]/x',
    'https://[::ffff:127.0.0.1]/x', 'https://[::ffff:7f00:1]/x', 'https://[fec0::1]/x', 'https://[2002:7f00:1::]/x',
    'https://[2002:c0a8:101::1]/x', 'https://[2002:a00:1::]/x', 'https://[::a00:1]/x']) {
    expect([url, endpointUrlProblem(url, false)]).toEqual([url, expect.any(String)]);
  }
  for (const url of ['https://hooks.example.com/x', 'https://[2606:4700:4700::1111]/x', 'https://[2002:808:808::1]/x', 'https://8.8.8.8/x']) {
    expect([url, endpointUrlProblem(url, false)]).toEqual([url, null]);
  }
  expect(isPrivateAddress('::ffff:0:a00:1')).toBe(true);
  expect(isPrivateAddress('2002:5db8:d822::1')).toBe(false);
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
