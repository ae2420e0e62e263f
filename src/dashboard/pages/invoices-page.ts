// Invoices: the filtered list, and refunding a paid one (also from the member page).
import type { Router } from 'express';
import { decimalOf, minorUnitsOf } from '../../core/money';
import { INVOICE_STATUSES } from '../../core/statuses';
import { sendDocument } from '../../web/express-io';
import { day, Html, html, money } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { backOf, csrfField, Json, memberLink, nextLink, Page, problemPage, queryOf, send, statusSelect, table, textFilter } from '../dashboard-layout';
import type { Signed } from '../dashboard-session';

/** An invoice's Refund: the amount (prefilled with what is left to refund) and the button. */
function refundForm(s: Signed, i: Json, back: string): Html {
  const id = `refund-${i.id}`;
  return html`<form class="inline" method="post" action="/dashboard/invoices/${encodeURIComponent(i.id)}/refund">${csrfField(s)}<input type="hidden" name="back" value="${back}">
<label for="${id}">Amount (${String(i.currency).toUpperCase()})</label> <input id="${id}" name="amount" inputmode="decimal" size="8" required value="${decimalOf(i.amount_paid_cents - i.amount_refunded_cents, i.currency)}">
<button type="submit" class="danger">Refund</button></form>`;
}

/** An invoice's cells, with its Refund form when the operator may refund it (also on the member page). */
export const invoiceRow = (s: Signed, back: string) => (i: Json) => [html`<code>${i.id}</code> <a href="/dashboard/invoices/${encodeURIComponent(i.id)}/pdf">${i.number ?? 'Draft'} (PDF)</a>`, memberLink(i.member_id), html`${i.billing_reason}`,
  html`${money(i.total_cents, i.currency)}${i.tax_cents ? html`<br><span class="muted">tax ${money(i.tax_cents, i.currency)}</span>` : ''}${i.reverse_charge ? html`<br><span class="muted">reverse charge</span>` : ''}`, html`${i.status}${i.amount_refunded_cents ? html` (refunded ${money(i.amount_refunded_cents, i.currency)})` : ''}${i.dispute ? html`, disputed: ${String(i.dispute.status).replace('_', ' ')}` : ''}`, html`${day(i.created_at)}`,
  // A disputed payment is never refunded (the operation refuses it: 409).
  s.can('invoices:write') && i.status === 'paid' && !i.dispute && i.amount_refunded_cents < i.amount_paid_cents ? refundForm(s, i, back) : html``];

export function mountInvoices(router: Router, ctx: DashboardContext): void {
  const { run, read, act } = ctx;
  router.get('/invoices', async (req, res) => {
    const page = await read<Page>(req, res, 'list_invoices', { query: queryOf(req, ['status', 'member_id', 'subscription_id']) });
    if (!page) return;
    send(req, res, 'Invoices', '/dashboard/invoices', html`<form class="filters" method="get" action="/dashboard/invoices">
${statusSelect('status', INVOICE_STATUSES, req.query.status)}${textFilter('member_id', 'Member id', req.query.member_id)}<div><button type="submit">Filter</button></div></form>
${table(['Id', 'Member', 'Reason', 'Total', 'Status', 'Created', ''], page.data.map(invoiceRow(req.signed!, '/dashboard/invoices')), 'No invoices match.')}${nextLink(req, page.next_cursor)}`);
  });

  // The invoice's PDF, as GET /v1/invoices/{id}/pdf answers it.
  router.get('/invoices/:id/pdf', async (req, res) => {
    const out = await run(req, 'get_invoice_pdf', { params: { id: String(req.params.id) } });
    if (out.problem || !out.document) return problemPage(req, res, out, '/dashboard/invoices');
    // The page policy (default-src 'none') would keep a browser's PDF viewer from showing it.
    res.removeHeader('Content-Security-Policy');
    sendDocument(res, out.document);
  });

  router.post('/invoices/:id/refund', async (req, res) => {
    // The amount typed (a decimal in the invoice's currency, read here: 500 is 500 yen
    // but 5.00 dollars); none: all that is left. Text that is no such decimal goes on as
    // typed, so the operation refuses it (422, amount_cents).
    const id = String(req.params.id);
    const back = backOf(req, '/dashboard/invoices');
    const amount = (req.body as Record<string, unknown>).amount;
    let body = {};
    if (typeof amount === 'string' && amount.trim() !== '') {
      const invoice = await run(req, 'get_invoice', { params: { id } });
      if (invoice.problem) return problemPage(req, res, invoice, back);
      body = { amount_cents: minorUnitsOf(amount, (invoice.body as Json).currency as string) ?? amount };
    }
    return act(req, res, 'refund_invoice', { params: { id }, body }, back, 'refunded');
  });
}
