// The catalog: tiers and plans, discount codes, and the whole catalog as a file.
import type { Router } from 'express';
import { orderedCatalogFile } from '../../domain/catalog/catalog-export';
import { html, money } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { Json, Page, send, table } from '../dashboard-layout';

export function mountCatalog(router: Router, ctx: DashboardContext): void {
  const { run, read } = ctx;
  router.get('/catalog', async (req, res) => {
    const tiers = await read<Page>(req, res, 'list_plans');
    if (!tiers) return;
    const discounts = await run(req, 'list_discounts');
    const codes = discounts.problem ? [] : (discounts.body as Page).data;
    const file = await run(req, 'get_catalog_file');
    send(req, res, 'Catalog', '/dashboard/catalog', html`<h2>Tiers and plans</h2>
${table(['Tier', 'Kind', 'Plans'], tiers.data.map((t) => [html`<strong>${t.name}</strong><br><span class="muted">${t.id}</span>`, html`${t.kind}`,
      html`${(t.plans as Json[]).map((p) => html`<div>${p.name ?? p.id}: ${money(p.amount_cents, p.currency)}${p.interval ? ` / ${p.interval}` : ' once'}${p.trial_days ? `, ${p.trial_days}-day trial` : ''}</div>`)}`]), 'No tiers yet.')}
<h2>Discount codes</h2>${table(['Code', 'Value', 'Duration', 'Redeemed', 'Active'], codes.map((d) => [html`<code>${d.code}</code>`,
      html`${d.value_type === 'percent' ? `${d.percent_off}% off` : money(d.amount_off_cents, d.currency) + ' off'}`, html`${d.duration}`, html`${d.redeemed_count}${d.use_limit ? ` of ${d.use_limit}` : ''}`, html`${d.is_active ? 'yes' : `no (${String(d.inactive_reason ?? 'disabled').replace('_', ' ')})`}`]), 'No discount codes.')}
<h2>As a catalog file</h2>${file.problem ? html`<p class="muted">The catalog file needs the plans:read and discounts:read scopes.</p>` : html`<p>This file is the whole catalog: platforms, entitlements and their benefits, tiers (inactive ones too) with their plans, discount codes, the payment provider and the retry schedule, the seller its invoices name and its tax rates, by their keys. <code>billing catalog apply --community ID FILE</code> recreates it in an empty community (staging, a copy) and changes nothing when applied here. It holds no secrets: a Stripe account's keys are set in the file you apply (<code>secret_key</code>, <code>webhook_secret</code>), never exported.</p>
<pre><code id="catalog-file">${JSON.stringify(orderedCatalogFile(file.body as Json), null, 2)}</code></pre><p><button type="button" class="secondary" data-copy="catalog-file">Copy</button></p>`}`);
  });
}
