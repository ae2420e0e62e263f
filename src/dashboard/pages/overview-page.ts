// The overview (/dashboard): MRR, subscribers, signups and cancels, their charts, and
// the MRR movements as recorded.
import type { Router } from 'express';
import { minorDigits } from '../../core/money';
import { Html, html, lineChart, money, raw } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { Json, send, table } from '../dashboard-layout';

export function mountOverview(router: Router, ctx: DashboardContext): void {
  const { read } = ctx;
  router.get('/', async (req, res) => {
    const days = req.query.days === '90' ? 90 : 30;
    // The summary and the series from one read of the subscriptions (analytics_overview).
    const overview = await read(req, res, 'get_analytics_overview', { query: { days: String(days) } });
    if (!overview) return;
    const summary = overview.summary as Json;
    const series = overview.series as Json;
    const cur = summary.currency as string | null;
    const points = (series.days as Json[]);
    send(req, res, 'Overview', '/dashboard', html`<div class="cards">
<div class="card"><div class="l">MRR</div><div class="n" data-testid="mrr">${money(summary.mrr_cents, cur)}</div></div>
<div class="card"><div class="l">Active subscribers</div><div class="n" data-testid="active">${summary.active_subscribers}</div></div>
<div class="card"><div class="l">Signups (30 days)</div><div class="n" data-testid="signups">${summary.recent_signups}</div></div>
<div class="card"><div class="l">Cancels (30 days)</div><div class="n">${summary.recent_cancels}</div></div>
<div class="card"><div class="l">Past due</div><div class="n">${series.past_due}</div></div></div>
<p><a href="/dashboard?days=30"${raw(days === 30 ? ' aria-current="true"' : '')}>Last 30 days</a> · <a href="/dashboard?days=90"${raw(days === 90 ? ' aria-current="true"' : '')}>Last 90 days</a></p>
<div class="charts">${lineChart(`MRR${series.currency ?? cur ? ` (${String(series.currency ?? cur).toUpperCase()})` : ''}, last ${days} days`, points.map((p) => ({ label: p.day, value: p.mrr_cents })),
      (v) => money(v, series.currency ?? cur), (v) => String(Math.round(v / 10 ** minorDigits(series.currency ?? cur))))}
${lineChart(`Signups per day, last ${days} days`, points.map((p) => ({ label: p.day, value: p.signups })), String)}
${lineChart(`Cancels per day, last ${days} days`, points.map((p) => ({ label: p.day, value: p.cancels })), String)}</div>
${mrrMovements(series, days)}`);
  });
}

/** The MRR movements as recorded when they happened: per month (12), then per day with any (the series' days). */
function mrrMovements(series: Json, days: number): Html {
  const c = series.currency as string | null;
  const kinds = ['new', 'expansion', 'contraction', 'churn', 'reactivation'] as const;
  const cells = (r: Json) => kinds.map((k) => html`${r[`${k}_cents`] ? money(r[`${k}_cents`], c) : '—'}`);
  const months = ((series.months ?? []) as Json[]).slice().reverse();
  const moved = ((series.days ?? []) as Json[]).filter((d) => kinds.some((k) => d[`${k}_cents`])).reverse();
  const heads = ['New', 'Expansion', 'Contraction', 'Churn', 'Reactivation'];
  return html`<h2 id="mrr-movements">MRR movements by month${c ? ` (${c.toUpperCase()})` : ''}</h2>
${table(['Month', 'Opening MRR', ...heads, 'Net', 'Closing MRR'], months.map((m) => [html`${String(m.month).slice(0, 7)}`, html`${money(m.opening_mrr_cents, c)}`,
    ...cells(m), html`${money(m.net_cents, c)}`, html`${money(m.closing_mrr_cents, c)}`]), 'No MRR yet.')}
<h2 id="mrr-movements-daily">MRR movements by day, last ${days} days</h2>
${table(['Day', ...heads, 'MRR at day end'], moved.map((d) => [html`${d.day}`, ...cells(d), html`${money(d.mrr_cents, c)}`]), 'No MRR movements in these days.')}`;
}
