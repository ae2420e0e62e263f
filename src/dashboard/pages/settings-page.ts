// Settings: what the community's invoices say of it (the seller) and how they are taxed
// (its tax rates by country; Stripe Tax), as GET /v1/tax-settings answers them. Read
// only: they are set with the catalog file, so they are written in one place
// (docs/decisions/tax.md).
import type { Router } from 'express';
import { percentOfPpm } from '../../core/money';
import { day, html } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { Json, send, table } from '../dashboard-layout';

export function mountSettings(router: Router, ctx: DashboardContext): void {
  const { read } = ctx;
  router.get('/settings', async (req, res) => {
    const t = await read<Json>(req, res, 'get_tax_settings');
    if (!t) return;
    const s = t.seller as Json;
    const dash = html`<span class="muted">not set</span>`;
    send(req, res, 'Settings', '/dashboard/settings', html`<h2>Seller (on invoices)</h2>
<dl class="facts"><dt>Legal name</dt><dd>${s.legal_name ?? html`${s.name} <span class="muted">(the display name: no legal name set)</span>`}</dd>
<dt>Address</dt><dd>${(s.address_lines as string[]).length ? html`${(s.address_lines as string[]).map((l) => html`${l}<br>`)}` : dash}</dd>
<dt>Country</dt><dd>${s.country ?? dash}</dd>
<dt>Tax id</dt><dd>${s.tax_id ?? dash}${s.eu_vat_id_valid === false ? html` <strong class="error">does not look like a VAT id of ${s.country}</strong>` : ''}</dd></dl>
<h2>Tax rates</h2>
<p>The buyer's country decides (from checkout); when it is unknown, the seller's country does. An EU business buyer in another member state with a VAT id is reverse charged.</p>
${table(['Country', 'Name', 'Rate', 'Prices', 'Active', 'Updated'], (t.rates as Json[]).map((r) => [html`${r.country}`, html`${r.name}`,
      html`${percentOfPpm(r.rate_ppm)}`, html`${r.inclusive ? 'include it' : 'exclude it (added)'}`, html`${r.active ? 'yes' : 'no'}`, html`${day(r.updated_at)}`]),
      'No tax rates: invoices carry no tax.')}
<h2>Stripe Tax</h2><p>${t.stripe_automatic_tax ? 'On: Stripe computes the tax of Stripe checkouts, and invoices record what it charged.' : 'Off.'}</p>
<p class="muted">These are set in the catalog file (<code>seller</code>, <code>tax_rates</code>, <code>payment_provider.automatic_tax</code>) with <code>billing catalog apply --community ID FILE</code>; the Catalog page shows the file.</p>`);
  });
}
