// Events: the outbox feed, filtered by type.
import type { Router } from 'express';
import { EVENT_TYPES } from '../../domain/events/event-types';
import { html } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { memberLink, nextLink, Page, queryOf, send, statusSelect, table } from '../dashboard-layout';

export function mountEvents(router: Router, ctx: DashboardContext): void {
  const { read } = ctx;
  router.get('/events', async (req, res) => {
    const page = await read<Page>(req, res, 'list_events', { query: queryOf(req, ['type']) });
    if (!page) return;
    send(req, res, 'Events', '/dashboard/events', html`<form class="filters" method="get" action="/dashboard/events">${statusSelect('type', EVENT_TYPES, req.query.type)}<div><button type="submit">Filter</button></div></form>
${table(['When', 'Type', 'Id', 'Subject'], page.data.map((e) => [html`${e.timestamp}`, html`${e.type}`, html`<code>${e.id}</code>`,
      e.data?.member?.id ? memberLink(e.data.member.id) : e.data?.member_id ? memberLink(e.data.member_id) : html`${e.data?.id ?? ''}`]), 'No events yet.')}${nextLink(req, page.next_cursor)}`);
  });
}
