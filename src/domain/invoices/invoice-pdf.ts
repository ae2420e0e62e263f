// An invoice as a PDF a tax office accepts (issue 30 item 3; docs/decisions/invoice-pdf.md):
// what billing_api.invoices_document answers (db/migrations/fixtures/functions/46-invoices.sql)
// laid out with pdfkit. Both parties (name, address, tax id), the number (or "Draft"), the
// dates, the lines, the subtotal, discount, tax lines and tax, the total, the reverse
// charge's legal mention (docs/decisions/tax.md), how and when it was paid, and the
// credit notes of its refunds; money in the currency's own places.
import { z } from 'zod';
import { decimalOf, percentOfPpm } from '../../core/money';
import { PAYMENT_PROVIDERS } from '../../core/statuses';
import type { DocumentRenderer, RenderedDocument } from '../operation';
import { invoice, invoiceTaxLine } from './invoice-schema';

const party = {
  address_lines: z.array(z.string()),
  country: z.string().nullable(),
  tax_id: z.string().nullable(),
};

export const invoiceDocument = z.object({
  invoice,
  seller: z.object({ name: z.string(), legal_name: z.string().nullable(), ...party }),
  // The member as the API shows it (identities, external subjects, and whatever it
  // gains, such as an email), under a buyer's name, address and tax id.
  buyer: z.object({
    id: z.string(),
    name: z.string().nullable(),
    email: z.string().nullable().optional(),
    identities: z.array(z.object({ platform: z.string(), username: z.string().nullable() }).loose()),
    ...party,
  }).loose(),
  payment_method: z.enum(PAYMENT_PROVIDERS).nullable(),
  tax_lines: z.array(invoiceTaxLine),
});
export type InvoiceDocument = z.infer<typeof invoiceDocument>;

// How it was paid, as far as the service knows: Stripe collects by card or by the other
// methods the community enabled there.
const METHODS: Record<(typeof PAYMENT_PROVIDERS)[number], string> = {
  sandbox: 'by sandbox test card (no money moved)',
  stripe: 'through Stripe',
};

const PLATFORM_NAMES: Record<string, string> = { discord: 'Discord', telegram: 'Telegram' };

/** Minor units in the currency's own places, with its code: 15.00 USD, 1200 JPY. */
export function amount(minor: number, currency: string): string {
  return `${decimalOf(minor, currency)} ${currency.toUpperCase()}`;
}

const date = (iso: string | null): string => (iso ? iso.slice(0, 10) : '');


// The standard PDF fonts (Helvetica) encode WinAnsi only; pdfkit writes any other
// character as bytes of the wrong glyphs. It prints as ? until a Unicode font is embedded.
const NOT_WINANSI = /[^\n\x20-\x7e\xa0-\xff\u20ac\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u017d\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u017e\u0178]/gu;
const printable = (text: string): string => text.replace(NOT_WINANSI, '?');

/** The file name of the PDF: its number, else its id (a draft). */
export function invoiceFilename(inv: { id: string; number: string | null }): string {
  return `${(inv.number ?? inv.id).replace(/[^A-Za-z0-9._-]/g, '_')}.pdf`;
}

function sellerLines(d: InvoiceDocument): string[] {
  const s = d.seller;
  const lines = [s.legal_name ?? s.name];
  if (s.legal_name && s.legal_name !== s.name) lines.push(`(${s.name})`);
  lines.push(...s.address_lines);
  if (s.country) lines.push(s.country);
  if (s.tax_id) lines.push(`Tax id: ${s.tax_id}`);
  return lines;
}


/** The buyer as far as known: a name or email when there is one, else the platform usernames; always the member id. */
function buyerLines(d: InvoiceDocument): string[] {
  const b = d.buyer;
  const lines: string[] = [];
  if (b.name) lines.push(b.name);
  if (b.email) lines.push(b.email);
  for (const i of b.identities) {
    if (i.username) lines.push(`${PLATFORM_NAMES[i.platform] ?? i.platform}: ${i.username}`);
  }
  lines.push(...b.address_lines);
  if (b.country) lines.push(b.country);
  if (b.tax_id) lines.push(`Tax id: ${b.tax_id}`);
  lines.push(`Member ${b.id}`);
  return lines;
}

type Doc = InstanceType<typeof import('pdfkit')>;

const LEFT = 50;
const RIGHT = 545; // A4 is 595 points wide
const AMOUNT_X = 420;

/** A row of the lines table: text on the left, the amount right-aligned. */
function row(doc: Doc, label: string, value: string, opts: { bold?: boolean; note?: string } = {}) {
  const y = doc.y;
  doc.font(opts.bold ? 'Helvetica-Bold' : 'Helvetica').fontSize(10);
  doc.text(printable(label), LEFT, y, { width: AMOUNT_X - LEFT - 10 });
  const after = doc.y;
  doc.text(value, AMOUNT_X, y, { width: RIGHT - AMOUNT_X, align: 'right' });
  doc.y = Math.max(after, doc.y);
  if (opts.note) doc.font('Helvetica').fontSize(8).fillColor('#555555').text(opts.note, LEFT + 10, doc.y).fillColor('#000000');
  doc.moveDown(0.3);
}

function heading(doc: Doc, text: string) {
  doc.moveDown(0.8).font('Helvetica-Bold').fontSize(11).text(text, LEFT, doc.y);
  doc.moveTo(LEFT, doc.y + 2).lineTo(RIGHT, doc.y + 2).lineWidth(0.5).stroke();
  doc.moveDown(0.5);
}

function layout(doc: Doc, d: InvoiceDocument) {
  const inv = d.invoice;
  const cur = inv.currency;
  doc.font('Helvetica-Bold').fontSize(20).text('Invoice', LEFT, 50);
  doc.font('Helvetica').fontSize(10)
    .text(inv.number ? `Number: ${printable(inv.number)}` : 'Draft: not numbered until it is finalized')
    .text(`Date: ${date(inv.created_at)}`)
    .text(`Status: ${inv.status}`);
  if (inv.period_start && inv.period_end) doc.text(`Period: ${date(inv.period_start)} to ${date(inv.period_end)}`);
  if (inv.paid_at) doc.text(`Paid: ${date(inv.paid_at)}${d.payment_method ? ` ${METHODS[d.payment_method]}` : ''}`);

  const top = doc.y + 20;
  doc.font('Helvetica-Bold').fontSize(10).text('From', LEFT, top);
  doc.font('Helvetica').text(printable(sellerLines(d).join('\n')), LEFT, doc.y, { width: 230 });
  const leftEnd = doc.y;
  doc.font('Helvetica-Bold').text('Billed to', 315, top);
  doc.font('Helvetica').text(printable(buyerLines(d).join('\n')), 315, doc.y, { width: 230 });
  doc.y = Math.max(leftEnd, doc.y);
  doc.x = LEFT;

  heading(doc, 'Lines');
  for (const line of inv.lines.filter((l) => l.type !== 'discount')) {
    const period = line.period_start && line.period_end ? `${date(line.period_start)} to ${date(line.period_end)}` : undefined;
    row(doc, line.description, amount(line.amount_cents, cur), { note: period });
  }
  for (const line of inv.lines.filter((l) => l.type === 'discount')) row(doc, line.description, amount(line.amount_cents, cur));

  heading(doc, 'Totals');
  row(doc, 'Subtotal', amount(inv.subtotal_cents, cur));
  if (inv.discount_cents > 0) row(doc, 'Discount', amount(-inv.discount_cents, cur));
  // Tax lines: an exclusive tax adds to the total, an inclusive one is part of the lines
  // already (said so); each with its rate, country and what it was computed on. None
  // is printed when the invoice has none.
  for (const t of d.tax_lines) {
    const rate = t.rate_ppm === null ? '' : ` ${percentOfPpm(t.rate_ppm)}`;
    const where = t.country ? ` (${t.country})` : '';
    const on = t.taxable_cents === null ? '' : ` on ${amount(t.taxable_cents, cur)}`;
    row(doc, `${t.name}${rate}${where}${on}${t.inclusive ? ', included' : ''}`, amount(t.amount_cents, cur));
  }
  if (d.tax_lines.length > 0) row(doc, 'Tax', amount(inv.tax_cents, cur));
  row(doc, 'Total', amount(inv.total_cents, cur), { bold: true });
  if (d.tax_lines.length > 0) row(doc, 'Total excluding tax', amount(inv.total_excluding_tax_cents, cur));
  if (inv.amount_paid_cents > 0) row(doc, 'Amount paid', amount(inv.amount_paid_cents, cur));
  if (inv.amount_refunded_cents > 0) row(doc, 'Refunded', amount(-inv.amount_refunded_cents, cur));

  // The legal mention an invoice carries (the EU reverse charge's), under the totals.
  if (inv.tax_note) doc.moveDown(0.5).font('Helvetica-Bold').fontSize(10).text(printable(inv.tax_note), LEFT, doc.y, { width: RIGHT - LEFT });

  if (inv.credit_notes.length > 0) {
    heading(doc, 'Credit notes');
    for (const cn of inv.credit_notes) {
      row(doc, `${cn.number} of ${date(cn.created_at)}, refund ${cn.refund_id}`, amount(-cn.amount_cents, cur),
        { note: cn.tax_cents > 0 ? `of which tax ${amount(-cn.tax_cents, cur)}` : undefined });
    }
  }

  doc.moveDown(2).font('Helvetica').fontSize(8).fillColor('#555555')
    .text(`Invoice ${inv.id}. Amounts in ${cur.toUpperCase()}.`, LEFT, doc.y, { width: RIGHT - LEFT });
}

/** Renders the document's data; resolves when pdfkit has written the last byte. */
export async function renderInvoicePdf(data: unknown): Promise<RenderedDocument> {
  const d = invoiceDocument.parse(data);
  // Loaded when first used: keeps pdfkit's fonts out of the service's start-up.
  const PDFDocument = require('pdfkit') as typeof import('pdfkit');
  const doc = new PDFDocument({
    size: 'A4', margin: 50,
    info: { Title: `Invoice ${d.invoice.number ?? d.invoice.id}`, Author: d.seller.legal_name ?? d.seller.name, CreationDate: new Date(d.invoice.created_at) },
  });
  const chunks: Buffer[] = [];
  const done = new Promise<void>((resolve, reject) => {
    doc.on('data', (c: Buffer) => chunks.push(c));
    doc.on('end', () => resolve());
    doc.on('error', reject);
  });
  layout(doc, d);
  doc.end();
  await done;
  return { mediaType: 'application/pdf', filename: invoiceFilename(d.invoice), bytes: Buffer.concat(chunks) };
}

export const invoicePdf: DocumentRenderer = {
  mediaType: 'application/pdf',
  description: 'The invoice as a PDF: both parties, its number (Draft before it has one), dates, lines, discount, tax, total, '
    + 'how and when it was paid, and the credit notes of its refunds.',
  render: renderInvoicePdf,
};
