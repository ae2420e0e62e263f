// The built-in sandbox provider: its checkout page is served by this service
// ({baseUrl}/sandbox/checkout/{cs_id}?t=<token>). GET shows what is being bought and a
// Pay button; POST to the same url pays it, with the same effect as a provider's
// "checkout completed" webhook (billing.complete_checkout), then redirects the buyer
// to return_url with checkout_id appended, or to the service's return page.
import crypto from 'node:crypto';
import express, { Request, Response } from 'express';
import type pg from 'pg';
import { inCommunity } from '../../db/community-transaction';
import { emailAddress } from '../../domain/members/member-schema';
import { applyCheckoutDiscount, checkoutCommunity, completeCheckout, setCheckoutDetails } from '../../domain/checkout/checkout-completion';
import { cancelTarget, returnTarget } from '../../domain/checkout/payment-port';
import type { CheckoutInfo, PaymentProvider, PortalInfo, ProviderContext } from '../../domain/checkout/payment-port';
import { decimalOf, percentOfPpm } from '../../core/money';

export class SandboxProvider implements PaymentProvider {
  readonly name = 'sandbox' as const;
  async ready(): Promise<boolean> { return true; }

  async createCheckout(ctx: ProviderContext, checkout: CheckoutInfo) {
    const page = `${ctx.baseUrl}/sandbox/checkout/${checkout.checkout_id}`;
    return { url: `${page}?t=${checkout.access_token}`, stored_url: page, expires_at: checkout.expires_at };
  }

  async createPortal(ctx: ProviderContext, portal: PortalInfo) {
    const page = `${ctx.baseUrl}/sandbox/portal/${portal.id}`;
    return { url: `${page}?t=${portal.access_token}`, stored_url: page };
  }

  // The sandbox keeps all subscription state in the database: nothing to call.
  async cancelAtPeriodEnd(): Promise<void> {}
  async reactivate(): Promise<void> {}
  async switchPlan(): Promise<void> {}
  async cancelScheduledSwitch(): Promise<void> {}
  async cancelNow(): Promise<void> {}
  async pause(): Promise<void> {}
  async resume(): Promise<void> {}
  // The sandbox's money is the database's: the refund is the record itself.
  async refund(): Promise<string | null> { return null; }
}

function escapeHtml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

export function formatMoney(cents: number, currency: string): string {
  return `${decimalOf(cents, currency)} ${currency.toUpperCase()}`;
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem}
dl{display:grid;grid-template-columns:auto 1fr;gap:.4rem 1rem}dt{color:#555}button{font-size:1.1rem;padding:.6rem 1.4rem}
.note{color:#555;font-size:.9rem}.error{color:#b3261e;font-weight:600}input{font-size:1rem;padding:.4rem}label{display:block}.banner{background:#fff3cd;border:2px solid #c69500;padding:.5rem;font-weight:600;text-align:center}</style></head><body>${body}</body></html>`;
}

/** Session ids as this service makes them; anything else (NUL included) is no session. */
const SESSION_ID = /^[a-z]{2,4}_[0-9a-z]{10,40}$/;

/** The sha256 a session keeps of its token (the clear token is never stored), or null. */
function tokenHash(token: unknown): Buffer | null {
  if (typeof token !== 'string' || token.length === 0 || token.length > 200) return null;
  return crypto.createHash('sha256').update(token, 'utf8').digest();
}

async function loadCheckout(pool: pg.Pool, id: string, token: unknown): Promise<{ communityId: string; communityName: string; info: CheckoutInfo } | null> {
  const hash = tokenHash(token);
  if (!hash || !SESSION_ID.test(id)) return null;
  const communityId = await checkoutCommunity(pool, id);
  if (!communityId) return null;
  const info = await inCommunity(pool, communityId, async (client) => {
    const { rows } = await client.query<{ r: CheckoutInfo; name: string }>(
      `select billing.checkout_json(cs) as r, c.name from billing.checkout_sessions cs
       join billing.communities c on c.id = cs.community_id
       where cs.community_id = $1 and cs.id = $2 and cs.access_token_sha256 = $3`, [communityId, id, hash]);
    return rows[0] ?? null;
  });
  if (!info || info.r.provider !== 'sandbox') return null;
  return { communityId, communityName: info.name, info: info.r };
}

/**
 * The tax as the buyer's billing details make it (billing.invoice_tax's preview): its
 * name, rate and country, whether the price includes it; the reverse charge; or null.
 */
function taxWords(info: CheckoutInfo): string | null {
  if (info.tax.reverse_charge) return 'none: reverse charge, the VAT is yours to account for (your VAT id)';
  const line = info.tax.tax_lines[0];
  if (!line) return null;
  const rate = line.rate_ppm === null ? '' : ` ${percentOfPpm(line.rate_ppm)}`;
  return `${line.name}${rate}${line.country ? ` (${line.country})` : ''}${line.inclusive ? ', included in the price' : ', added to the price'}`;
}

/** What the buyer pays, in words: today's amount (with the tax added on top), then the renewal (trial, discount duration). */
function terms(info: CheckoutInfo): { today: string; then: string | null } {
  const exclusive = info.tax.tax_lines.find((l) => !l.inclusive && l.amount_cents > 0);
  const plusTax = exclusive ? ` plus ${exclusive.name}` : '';
  const full = formatMoney(info.amount_cents, info.currency) + plusTax;
  const discounted = formatMoney(info.amount_cents - info.discount_cents + info.tax.tax_exclusive_cents, info.currency);
  const every = info.interval ? ` per ${info.interval}` : '';
  const trial = info.trial_days > 0 && info.interval;
  const d = info.discount;
  const discountSpan = !d ? '' : d.duration === 'once' ? 'on the first payment' : d.duration === 'forever' ? 'on every payment' : `for ${d.duration_months} months`;
  if (trial) {
    return { today: formatMoney(0, info.currency), then: `${info.discount_cents ? `${discounted}${every} (${discountSpan}, then ${full}${every})` : `${full}${every}`} after the ${info.trial_days}-day free trial, unless you cancel before it ends` };
  }
  if (!info.interval) return { today: discounted, then: null };
  const renew = d && d.duration !== 'forever' ? full : discounted;
  return { today: discounted, then: `then ${renew}${every} until you cancel${info.discount_cents && d?.duration !== 'forever' ? ` (discount ${discountSpan})` : ''}` };
}

/**
 * "Connect Discord" (src/linking/discord-connect.ts): the Discord connection of the
 * tier's benefits whose OAuth2 application is set, while the buyer has no Discord
 * account on the member yet; null otherwise.
 */
async function discordToConnect(pool: pg.Pool, communityId: string, checkoutId: string): Promise<string | null> {
  return inCommunity(pool, communityId, async (client) => {
    const { rows } = await client.query<{ id: string }>(
      `select pc.id from billing.checkout_sessions cs
       join billing.tier_entitlements te on te.community_id = cs.community_id and te.tier_id = cs.tier_id
       join billing.entitlement_benefits b on b.community_id = te.community_id and b.entitlement_id = te.entitlement_id
       join billing.platform_configs pc on pc.community_id = b.community_id and pc.id = b.platform_config_id
       where cs.community_id = $1 and cs.id = $2 and pc.platform = 'discord' and pc.settings ? 'client_id'
         and not exists (select 1 from billing.member_identities i
                         where i.community_id = cs.community_id and i.member_id = cs.member_id and i.platform = 'discord')
       order by pc.id limit 1`, [communityId, checkoutId]);
    return rows[0]?.id ?? null;
  });
}

const DISCORD_NOTICE: Record<string, string> = {
  connected: 'Your Discord account is connected: your roles arrive once you have paid.',
  declined: 'Discord was not connected.',
  identity_taken: 'That Discord account belongs to another member of this community.',
  member_has_identity: 'Another Discord account is already connected for you.',
};

function checkoutPage(communityName: string, info: CheckoutInfo, action: string, cancel: string, discountError?: string,
  discord: { connect: string | null; notice: string | null } = { connect: null, notice: null },
  detailsError?: { field: string; message: string }): string {
  const price = formatMoney(info.amount_cents, info.currency);
  const { today, then } = terms(info);
  const tax = taxWords(info);
  const rows = [
    ['Sold by', escapeHtml(communityName)],
    ['Tier', escapeHtml(info.tier_name)],
    ['Plan', escapeHtml(info.plan_name ?? info.plan_id)],
    ['Price', `${escapeHtml(price)}${info.interval ? ` per ${escapeHtml(info.interval)}` : ' once'}`],
    ['Discount', info.discount_code ? `${escapeHtml(info.discount_code)} (−${escapeHtml(formatMoney(info.discount_cents, info.currency))})` : 'none'],
    ['Due today', `<strong>${escapeHtml(today)}</strong>`],
  ];
  // The tax as the billing details below make it; no row where the community charges none.
  if (tax || info.taxes) {
    rows.splice(rows.length - 1, 0, ['Tax', tax ? `${escapeHtml(tax)}${info.tax.tax_cents > 0 ? `: ${escapeHtml(formatMoney(info.tax.tax_cents, info.currency))}` : ''}`
      : info.billing_details.country ? 'none' : 'by your country (below)']);
  }
  if (then) rows.push(['After that', escapeHtml(then)]);
  let action_html: string;
  if (info.status === 'completed') action_html = '<p><strong>This checkout is already paid.</strong></p>';
  else if (info.expired) action_html = '<p><strong>This checkout has expired.</strong></p>';
  else {
    const label = info.trial_days > 0 && info.interval ? `Start the ${info.trial_days}-day trial` : `Pay ${today}`;
    // The second button simulates a card that declines (issue 11): nothing is recorded.
    const discountAction = action.replace(/^(\/sandbox\/checkout\/[^/?]+)/, '$1/discount');
    const detailsAction = action.replace(/^(\/sandbox\/checkout\/[^/?]+)/, '$1/details');
    const b = info.billing_details;
    // The billing details decide the tax (the buyer's country; a VAT id of another EU
    // state than the seller's: reverse charge) and go on the invoice.
    const detailsHtml = `<form method="post" action="${escapeHtml(detailsAction)}"><fieldset><legend>Billing details (for your invoice and its tax)</legend>
<p><label for="customer_name">Name or company</label><input id="customer_name" name="customer_name" value="${escapeHtml(b.name ?? '')}" maxlength="200" autocomplete="name"></p>
<p><label for="customer_address">Address (one line each)</label><textarea id="customer_address" name="customer_address" rows="3" cols="40" maxlength="600" autocomplete="street-address">${escapeHtml(b.address_lines.join('\n'))}</textarea></p>
<p><label for="customer_country">Country (two letters, e.g. DE)</label><input id="customer_country" name="customer_country" value="${escapeHtml(b.country ?? '')}" maxlength="2" size="3" autocomplete="country"${detailsError?.field === 'customer_country' ? ' aria-invalid="true" aria-describedby="details-error"' : ''}></p>
<p><label for="customer_tax_id">VAT or tax id (businesses)</label><input id="customer_tax_id" name="customer_tax_id" value="${escapeHtml(b.tax_id ?? '')}" maxlength="50"></p>
<button type="submit" class="secondary">Save details</button>
${detailsError ? `<p id="details-error" class="error" role="alert">${escapeHtml(detailsError.message)}</p>` : ''}</fieldset></form>`;
    action_html = `${detailsHtml}<form method="post" action="${escapeHtml(discountAction)}"><p><label for="discount_code">Discount code</label>
<input id="discount_code" name="discount_code" value="${escapeHtml(info.discount_code ?? '')}" maxlength="64" autocomplete="off"${discountError ? ' aria-invalid="true" aria-describedby="discount-error"' : ''}>
<button type="submit">${info.discount_code ? 'Change code' : 'Apply code'}</button></p>
${discountError ? `<p id="discount-error" class="error" role="alert">${escapeHtml(discountError)}</p>` : ''}</form>
<form method="post" action="${escapeHtml(action)}">${info.needs_email ? `<p><label for="email">Email for your receipts</label>
<input id="email" name="email" type="email" maxlength="254" autocomplete="email"></p>` : ''}<button type="submit" name="card" value="pay">${escapeHtml(label)}</button>
<button type="submit" name="card" value="decline">Use a card that declines</button></form>
<p><a href="${escapeHtml(cancel)}">Cancel and go back</a></p>`;
  }
  const discordHtml = (discord.notice ? `<p role="status">${escapeHtml(discord.notice)}</p>` : '')
    + (discord.connect && info.status !== 'completed' && !info.expired
      ? `<p><a href="${escapeHtml(discord.connect)}">Connect Discord</a> <span class="note">so your roles arrive as soon as you have paid, and you join the server.</span></p>` : '');
  return page(`Checkout: ${info.tier_name} · ${communityName}`, `<p class="banner" role="note">Test mode: sandbox payments, no money moves and no card is charged.</p>
<h1>${escapeHtml(communityName)}: ${escapeHtml(info.tier_name)}</h1>
<dl>${rows.map(([k, v]) => `<dt>${k}</dt><dd>${v}</dd>`).join('')}</dl>
${discordHtml}
${action_html}
<p class="note">Checkout ${escapeHtml(info.checkout_id)}, open until ${escapeHtml(info.expires_at)}.</p>`);
}

export function mountSandboxRoutes(app: express.Express, pool: pg.Pool, baseUrl: (req: Request) => string): void {
  const router = express.Router();
  // Pages with pay tokens in their URL: no framing (clickjacking the Pay button), no
  // script, no sniffing, no caching. The form posts to itself and may be redirected
  // to the operator's https return_url (form-action covers redirects).
  router.use((_req, res, next) => {
    res.setHeader('Content-Security-Policy',
      "default-src 'none'; style-src 'unsafe-inline'; form-action 'self' https:; frame-ancestors 'none'; base-uri 'none'");
    res.setHeader('X-Frame-Options', 'DENY');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Cache-Control', 'no-store');
    res.setHeader('Referrer-Policy', 'no-referrer');
    next();
  });

  router.get('/checkout/:id', async (req: Request, res: Response) => {
    const found = await loadCheckout(pool, String(req.params.id), req.query.t);
    if (!found) return void res.status(404).type('html').send(page('Not found', '<h1>No such checkout</h1>'));
    const pcfg = await discordToConnect(pool, found.communityId, found.info.checkout_id);
    const discord = {
      connect: pcfg ? `/platforms/discord/${pcfg}/connect?checkout=${found.info.checkout_id}&t=${encodeURIComponent(String(req.query.t))}` : null,
      notice: DISCORD_NOTICE[String(req.query.discord)] ?? null,
    };
    res.type('html').send(checkoutPage(found.communityName, found.info, req.originalUrl, cancelTarget(found.info, baseUrl(req), String(req.query.t)), undefined, discord));
  });

  // The discount field: applies the code (the rules of POST /v1/checkout-links), then
  // shows the page again with the new total; a refused code is shown beside the field.
  router.post('/checkout/:id/discount', express.urlencoded({ extended: false }), async (req: Request, res: Response) => {
    const found = await loadCheckout(pool, String(req.params.id), req.query.t);
    if (!found) return void res.status(404).type('html').send(page('Not found', '<h1>No such checkout</h1>'));
    const raw = (req.body as Record<string, unknown> | undefined)?.discount_code;
    const code = typeof raw === 'string' ? raw.trim().slice(0, 64) : '';
    const self = `/sandbox/checkout/${found.info.checkout_id}?t=${encodeURIComponent(String(req.query.t))}`;
    try {
      await inCommunity(pool, found.communityId, (client) => applyCheckoutDiscount(client, found.info.checkout_id, code));
    } catch (err) {
      const e = err as { code?: string; message?: string };
      if (e.code === 'BLDSC' || e.code === 'BL409') {
        const again = await loadCheckout(pool, found.info.checkout_id, req.query.t);
        return void res.status(e.code === 'BLDSC' ? 422 : 409).type('html')
          .send(checkoutPage(found.communityName, (again ?? found).info, self, cancelTarget(found.info, baseUrl(req), String(req.query.t)), e.message));
      }
      throw err;
    }
    res.redirect(303, self);
  });

  // The billing details form: saved on the checkout (billing.checkout_set_details),
  // then the page again with the tax they make; a refused field is shown beside it.
  router.post('/checkout/:id/details', express.urlencoded({ extended: false }), async (req: Request, res: Response) => {
    const found = await loadCheckout(pool, String(req.params.id), req.query.t);
    if (!found) return void res.status(404).type('html').send(page('Not found', '<h1>No such checkout</h1>'));
    const body = (req.body ?? {}) as Record<string, unknown>;
    const field = (name: string, max: number) => (typeof body[name] === 'string' ? (body[name] as string).trim().slice(0, max) : '');
    const details = {
      customer_name: field('customer_name', 200),
      customer_address_lines: field('customer_address', 600).split(/\r?\n/).map((l) => l.trim()).filter(Boolean).slice(0, 7),
      customer_country: field('customer_country', 10),
      customer_tax_id: field('customer_tax_id', 60),
    };
    const self = `/sandbox/checkout/${found.info.checkout_id}?t=${encodeURIComponent(String(req.query.t))}`;
    try {
      await inCommunity(pool, found.communityId, (client) => setCheckoutDetails(client, found.info.checkout_id, details));
    } catch (err) {
      const e = err as { code?: string; message?: string; detail?: string };
      if (e.code === 'BL422' || e.code === 'BL409') {
        const again = await loadCheckout(pool, found.info.checkout_id, req.query.t);
        return void res.status(e.code === 'BL422' ? 422 : 409).type('html')
          .send(checkoutPage(found.communityName, (again ?? found).info, self, cancelTarget(found.info, baseUrl(req), String(req.query.t)), undefined,
            undefined, { field: e.detail ?? '', message: e.message ?? 'These details cannot be saved.' }));
      }
      throw err;
    }
    res.redirect(303, self);
  });

  router.post('/checkout/:id', express.urlencoded({ extended: false }), async (req: Request, res: Response) => {
    const found = await loadCheckout(pool, String(req.params.id), req.query.t);
    if (!found) return void res.status(404).type('html').send(page('Not found', '<h1>No such checkout</h1>'));
    if ((req.body as Record<string, unknown> | undefined)?.card === 'decline' && found.info.status === 'open' && !found.info.expired) {
      // As Stripe Checkout: a declined card creates nothing; the buyer may try again.
      return void res.status(402).type('html').send(page('Card declined', `<h1>Your card was declined</h1>
<p>Nothing was charged and nothing was created. <a href="${escapeHtml(req.originalUrl)}">Try again</a>.</p>`));
    }
    // The email field (shown when neither the link nor the member has one): recorded on
    // the member at completion (billing.complete_checkout).
    const email = String((req.body as Record<string, unknown> | undefined)?.email ?? '').trim();
    if (email !== '' && !emailAddress.safeParse(email).success) {
      return void res.status(422).type('html').send(page('Check your email', `<h1>That email address does not look right</h1>
<p><a href="${escapeHtml(req.originalUrl)}">Go back and correct it</a>.</p>`));
    }
    try {
      await inCommunity(pool, found.communityId, (client) => completeCheckout(client, found.info.checkout_id, email ? { customer_email: email } : {}));
    } catch (err) {
      const e = err as { code?: string; message?: string };
      if (e.code === 'BL409' || e.code === 'BLNEL') {
        return void res.status(409).type('html').send(page('Cannot pay', `<h1>Cannot pay this checkout</h1><p>${escapeHtml(e.message)}</p>`));
      }
      throw err;
    }
    res.redirect(303, returnTarget(found.info, baseUrl(req)));
  });

  router.get('/return', (req: Request, res: Response) => {
    res.type('html').send(page('Thank you', `<h1>Thank you</h1><p>Checkout ${escapeHtml(req.query.checkout_id)} is being processed.
Reaching this page is not a payment confirmation: your access appears once the payment is recorded.</p>`));
  });

  // Where an abandoned checkout lands (Stripe's cancel_url; the sandbox page's Cancel
  // link): never the thank-you page. Links back to the checkout's return_url, if any,
  // with cancelled=1. Like the pay page, only for the holder of the checkout's pay token
  // (t): the return_url is the operator's, query string included.
  router.get('/cancelled', async (req: Request, res: Response) => {
    const checkoutId = typeof req.query.checkout_id === 'string' ? req.query.checkout_id : '';
    const hash = tokenHash(req.query.t);
    const communityId = hash && SESSION_ID.test(checkoutId) ? await checkoutCommunity(pool, checkoutId) : null;
    const found = communityId ? await inCommunity(pool, communityId, async (client) => {
      const { rows } = await client.query<{ return_url: string | null }>(
        'select return_url from billing.checkout_sessions where community_id = $1 and id = $2 and access_token_sha256 = $3',
        [communityId, checkoutId, hash]);
      return rows[0] ?? null;
    }) : null;
    if (!found) return void res.status(404).type('html').send(page('Not found', '<h1>No such checkout</h1>'));
    let back = '';
    if (found.return_url) {
      const target = new URL(found.return_url);
      target.searchParams.set('checkout_id', checkoutId);
      target.searchParams.set('cancelled', '1');
      back = `<p><a href="${escapeHtml(target.toString())}">Back to the shop</a></p>`;
    }
    res.type('html').send(page('Checkout cancelled', `<h1>Checkout cancelled</h1>
<p>You left the checkout before paying: nothing was charged and nothing was bought.</p>${back}`));
  });

  // The member portal's pages (/sandbox/portal/...) are src/dashboard/portal-routes.ts.

  // Express 5 passes a rejected handler's error to the app's error handler.
  app.use('/sandbox', router);
}
