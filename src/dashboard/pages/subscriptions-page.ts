// Subscriptions: the filtered list, and cancelling or reactivating one (the member
// page offers those buttons).
import type { Router } from 'express';
import { SUBSCRIPTION_STATUSES } from '../../core/statuses';
import { day, html, money } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { backOf, Json, memberLink, nextLink, Page, queryOf, send, statusSelect, table, textFilter } from '../dashboard-layout';

/** A subscription's cells (also on the member page). */
export const subscriptionRow = (s: Json) => [html`<code>${s.id}</code>`, memberLink(s.member_id), html`${s.tier_name ?? s.tier_id} · ${s.plan_name ?? s.plan_id}`,
  html`${money(s.amount_cents, s.currency)}${s.interval ? ` / ${s.interval}` : ''}`, html`${s.status}`, html`${day(s.current_period_end)}`];

export function mountSubscriptions(router: Router, ctx: DashboardContext): void {
  const { read, act } = ctx;
  router.get('/subscriptions', async (req, res) => {
    const page = await read<Page>(req, res, 'list_subscriptions', { query: queryOf(req, ['status', 'plan_id', 'tier_id', 'member_id']) });
    if (!page) return;
    send(req, res, 'Subscriptions', '/dashboard/subscriptions', html`<form class="filters" method="get" action="/dashboard/subscriptions">
${statusSelect('status', SUBSCRIPTION_STATUSES, req.query.status)}${textFilter('plan_id', 'Plan id', req.query.plan_id)}${textFilter('tier_id', 'Tier id', req.query.tier_id)}${textFilter('member_id', 'Member id', req.query.member_id)}
<div><button type="submit">Filter</button></div></form>
${table(['Id', 'Member', 'Plan', 'Price', 'Status', 'Period ends'], page.data.map(subscriptionRow), 'No subscriptions match.')}${nextLink(req, page.next_cursor)}`);
  });

  router.post('/subscriptions/:id/cancel', (req, res) => act(req, res, 'cancel_subscription', { params: { id: String(req.params.id) } }, backOf(req, '/dashboard/subscriptions'), 'cancelled'));
  router.post('/subscriptions/:id/reactivate', (req, res) => act(req, res, 'reactivate_subscription', { params: { id: String(req.params.id) } }, backOf(req, '/dashboard/subscriptions'), 'reactivated'));
}
