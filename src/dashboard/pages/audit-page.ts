// Audit log: who changed what, filtered by actor, table, operation and day (list_audit_log;
// docs/decisions/audit-log.md). Each entry's change opens in a <details>: the changed
// columns before and after for an update, the row for an insert or a delete.
import type { Request, Router } from 'express';
import { AUDIT_ACTOR_TYPES, AUDIT_OPERATIONS, AUDITED_TABLES } from '../../core/statuses';
import { Html, html } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { Json, memberLink, nextLink, Page, send, statusSelect, table, textFilter } from '../dashboard-layout';

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** The page's filters as the operation's query: "to" is a whole day, so the list ends before the next one. */
function auditQuery(req: Request): Record<string, string> {
  const q: Record<string, string> = {};
  for (const name of ['actor_type', 'actor_id', 'table', 'row_id', 'operation', 'cursor']) {
    const v = req.query[name];
    if (typeof v === 'string' && v.trim() !== '') q[name] = v.trim();
  }
  const from = req.query.from, to = req.query.to;
  if (typeof from === 'string' && from !== '') q.since = from;
  if (typeof to === 'string' && to !== '') {
    q.until = DAY.test(to) && !Number.isNaN(Date.parse(`${to}T00:00:00Z`))
      ? new Date(Date.parse(`${to}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10) : to;
  }
  return q;
}

const dateFilter = (name: string, label: string, current: unknown) => html`<div><label for="f-${name}">${label}</label>
<input id="f-${name}" name="${name}" type="date" value="${typeof current === 'string' ? current : ''}"></div>`;

const value = (v: unknown) => html`<code>${v === undefined ? '(none)' : JSON.stringify(v)}</code>`;

/** What changed: an update's columns before → after, an insert's or a delete's row; an export, no data. */
function change(e: Json): Html {
  if (e.operation === 'export') return html`<span>data exported (not recorded here)</span>`;
  const before = (e.before ?? {}) as Json, after = (e.after ?? {}) as Json;
  const rows: Html[] = e.operation === 'update'
    ? (e.changed as string[]).map((c) => (c in after || c in before
      ? html`<dt>${c}</dt><dd>${value(before[c])} → ${value(after[c])}</dd>`
      : html`<dt>${c}</dt><dd class="muted">changed (not recorded: a credential or personal data)</dd>`))
    : Object.entries(e.operation === 'insert' ? after : before).filter(([k]) => k !== 'community_id')
      .map(([k, v]) => html`<dt>${k}</dt><dd>${value(v)}</dd>`);
  const what = e.operation === 'update' ? `${(e.changed as string[]).length} changed` : e.operation === 'insert' ? 'new row' : 'removed row';
  return html`<details><summary>${what}</summary><dl class="facts">${rows}</dl></details>`;
}

function actor(e: Json): Html {
  const who = e.actor_type === 'member' && e.actor_id ? memberLink(e.actor_id as string) : html`<code>${e.actor_id ?? ''}</code>`;
  return html`${e.actor_type} ${who}${e.request_id ? html`<br><span class="muted">request <code>${e.request_id}</code></span>` : ''}`;
}

export function mountAudit(router: Router, ctx: DashboardContext): void {
  const { read } = ctx;
  router.get('/audit', async (req, res) => {
    const page = await read<Page>(req, res, 'list_audit_log', { query: auditQuery(req) });
    if (!page) return;
    send(req, res, 'Audit log', '/dashboard/audit', html`<p class="muted">Every change to the catalog, keys, webhooks, settings and operators, the changes people and keys made to subscriptions, invoices, refunds, grants and members, and every export of a member's data, recorded by the database. Credentials and personal data are never kept here.</p>
<form class="filters" method="get" action="/dashboard/audit">
${statusSelect('actor_type', AUDIT_ACTOR_TYPES, req.query.actor_type)}${textFilter('actor_id', 'Actor id', req.query.actor_id)}
${statusSelect('table', AUDITED_TABLES, req.query.table)}${statusSelect('operation', AUDIT_OPERATIONS, req.query.operation)}${textFilter('row_id', 'Row id', req.query.row_id)}
${dateFilter('from', 'From (day)', req.query.from)}${dateFilter('to', 'To (day)', req.query.to)}
<div><button type="submit">Filter</button></div></form>
${table(['When', 'Who', 'What', 'Change'], page.data.map((e) => [html`${e.occurred_at}`, actor(e),
      html`${e.operation} <code>${e.table}</code> <code>${e.row_id ?? ''}</code>`, change(e)]), 'No changes match.')}${nextLink(req, page.next_cursor)}`);
  });
}
