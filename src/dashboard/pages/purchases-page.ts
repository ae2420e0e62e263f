// Purchases: one-time payments and the access they give.
import type { Router } from 'express';
import { day, html, money } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { memberLink, nextLink, Page, queryOf, send, table } from '../dashboard-layout';

export function mountPurchases(router: Router, ctx: DashboardContext): void {
  const { read } = ctx;
  router.get('/purchases', async (req, res) => {
    const page = await read<Page>(req, res, 'list_purchases', { query: queryOf(req, []) });
    if (!page) return;
    send(req, res, 'Purchases', '/dashboard/purchases', html`${table(['Id', 'Member', 'Plan', 'Amount', 'Status', 'Paid', 'Access until'], page.data.map((p) => [
      html`<code>${p.id}</code>`, memberLink(p.member_id), html`${p.tier_name ?? p.tier_id} · ${p.plan_name ?? p.plan_id}`, html`${money(p.amount_cents, p.currency)}`,
      html`${p.status}`, html`${day(p.paid_at)}`, html`${day(p.access_expires_at)}`]), 'No purchases yet.')}${nextLink(req, page.next_cursor)}`);
  });
}
