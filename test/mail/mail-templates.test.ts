// The templates of mail to members (billing.mail_render, 65-mail.sql): amounts in the
// currency's own places, as src/core/money.ts writes them; the community's name and
// every value escaped in the HTML; the portal link left as a placeholder for the
// signed link (src/domain/mail/mail-links.ts), which opens only with its signature.
import { decimalOf } from '../../src/core/money';
import { fillLinks, portalLink, verifyLink } from '../../src/domain/mail/mail-links';
import { startApp, TestApp } from '../support/app';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

test('amounts are written in each currency\'s own places, as decimalOf writes them', async () => {
  const cases: [number, string][] = [[1250, 'usd'], [5, 'eur'], [500, 'jpy'], [1250, 'kwd'], [7, 'bhd'], [123456, 'krw'], [990, 'clp'], [100, 'isk'], [-1250, 'usd']];
  for (const [minor, currency] of cases) {
    const { rows } = await app.owner.query<{ t: string }>('select billing.money_text($1, $2) as t', [minor, currency]);
    expect([minor, currency, rows[0].t]).toEqual([minor, currency, `${decimalOf(minor, currency)} ${currency.toUpperCase()}`]);
  }
});

test('the HTML escapes the community name and the invoice\'s lines; the text keeps them as typed', async () => {
  const data = { invoice: { id: 'inv_1', number: '2026-000001', currency: 'jpy', total_cents: 500, amount_paid_cents: 500, paid_at: '2026-01-02T03:04:05.000Z',
    lines: [{ description: '<img src=x onerror=alert(1)>', amount_cents: 500 }] } };
  const { rows } = await app.owner.query<{ m: { subject: string; text: string; html: string } }>(
    'select billing.mail_render($1, $2, $3) as m', ['<b>"Acme" & co</b>', 'receipt', data]);
  const m = rows[0].m;
  expect(m.subject).toBe('Receipt from <b>"Acme" & co</b>: 500 JPY');
  expect(m.text).toContain('Amount paid: 500 JPY');
  expect(m.text).toContain('Invoice: 2026-000001');
  expect(m.html).toContain('&lt;b&gt;&quot;Acme&quot; &amp; co&lt;/b&gt;');
  expect(m.html).toContain('&lt;img src=x onerror=alert(1)&gt;');
  expect(m.html).not.toMatch(/<img|<b>/);
  expect(m.text).toContain('{{portal_url}}');
});

test('a receipt names its tax lines, so its lines add up to the amount paid, and a reverse charge\'s mention', async () => {
  const render = async (invoice: object) => (await app.owner.query<{ m: { text: string; html: string } }>(
    'select billing.mail_render($1, $2, $3) as m', ['Acme', 'receipt', { invoice }])).rows[0].m;
  const added = await render({ id: 'inv_1', number: '2026-000002', currency: 'eur', amount_paid_cents: 1190, paid_at: '2026-01-02T03:04:05.000Z',
    lines: [{ description: 'Gold monthly', amount_cents: 1000 }],
    tax_lines: [{ name: 'VAT', rate_ppm: 190000, country: 'DE', inclusive: false, amount_cents: 190 }] });
  expect(added.text).toContain('  Gold monthly: 10.00 EUR\n  VAT 19% (DE): 1.90 EUR');
  expect(added.text).toContain('Amount paid: 11.90 EUR');
  expect(added.html).toContain('<li>VAT 19% (DE): 1.90 EUR</li>');
  const included = await render({ id: 'inv_2', currency: 'eur', amount_paid_cents: 1000, paid_at: '2026-01-02T03:04:05.000Z',
    lines: [{ description: 'Gold monthly', amount_cents: 1000 }],
    tax_lines: [{ name: 'VAT', rate_ppm: 230000, country: 'IE', inclusive: true, amount_cents: 187 }] });
  expect(included.text).toContain('  VAT 23% (IE) (included): 1.87 EUR');
  const reverse = await render({ id: 'inv_3', currency: 'eur', amount_paid_cents: 1000, paid_at: '2026-01-02T03:04:05.000Z',
    lines: [{ description: 'Gold monthly', amount_cents: 1000 }], tax_lines: [],
    tax_note: 'Reverse charge: VAT to be accounted for by the recipient, Article 196 Directive 2006/112/EC.' });
  expect(reverse.text).toContain('Reverse charge: VAT to be accounted for by the recipient');
  expect(reverse.html).toContain('<p>Reverse charge: VAT to be accounted for by the recipient');
});

test('a portal link opens only with its own signature, until it expires', () => {
  const link = new URL(portalLink('https://billing.example', 'k', 'com_a', 'mem_b'));
  const exp = link.searchParams.get('exp')!;
  const sig = link.searchParams.get('sig')!;
  expect(link.pathname).toBe('/mail/portal/com_a/mem_b');
  expect(verifyLink('k', 'portal', 'com_a', 'mem_b', exp, sig)).toBe(true);
  expect(verifyLink('other key', 'portal', 'com_a', 'mem_b', exp, sig)).toBe(false);
  expect(verifyLink('k', 'portal', 'com_a', 'mem_c', exp, sig)).toBe(false);
  expect(verifyLink('k', 'portal', 'com_a', 'mem_b', String(Number(exp) + 1), sig)).toBe(false);
  expect(verifyLink('k', 'portal', 'com_a', 'mem_b', exp, sig, (Number(exp) + 1) * 1000)).toBe(false);
  const html = fillLinks('<a href="{{portal_url}}">x</a>', { baseUrl: 'https://b', key: 'k', communityId: 'com_a', memberId: 'mem_b' }, true);
  expect(html).toMatch(/href="https:\/\/b\/mail\/portal\/com_a\/mem_b\?exp=\d+&amp;sig=/);
});

test('a signed link to a member of another community, or with a wrong signature, answers 404', async () => {
  const key = 'test-key';
  const other = await startApp({ webhookEncryptionKey: key });
  try {
    const forged = portalLink(other.url, 'not-the-key', 'com_01a215e90b970000086dda7919', 'mem_01a215e90b970000086dda7919');
    expect((await fetch(forged, { redirect: 'manual' })).status).toBe(404);
    const unknown = portalLink(other.url, key, 'com_01a215e90b970000086dda7919', 'mem_01a215e90b970000086dda7919');
    expect((await fetch(unknown, { redirect: 'manual' })).status).toBe(404);
  } finally {
    await other.close();
  }
});
