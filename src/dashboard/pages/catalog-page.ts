// The catalog: tiers and plans, discount codes, and the whole catalog as a file; and,
// for operators who may (catalog:write: admins, owners), the forms that create, change
// and archive tiers, plans, entitlements with a benefit and discount codes (issue 31
// item 1). Each form runs the /v1/catalog operation of the same change, so the database
// holds the rules (functions/20-catalog-write.sql) exactly as for the API and
// `billing catalog apply`; a refused form is shown again with the problem beside the
// field it names (the problem's param). A price change is reviewed first: the page
// says how many subscribers it concerns (they keep their price until migrated with
// notice) before the operator saves it.
import type { Request, Response, Router } from 'express';
import { orderedCatalogFile } from '../../domain/catalog/catalog-export';
import type { Outcome } from '../../operations/executor';
import { Html, html, money, raw } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { actionForm, csrfField, Json, listField, Page, problemPage, send, table } from '../dashboard-layout';
import type { Signed } from '../dashboard-session';

/** A form refused: which one, the field its problem names (or null), the problem, what was entered. */
interface FormProblem { form: string; field: string | null; detail: string; values: Json; code?: string }

/** The form field a problem's param names: 'entitlements[0]' is the entitlements checkboxes, 'benefits[0].value' the benefit's value. */
function fieldOf(param: unknown): string | null {
  if (typeof param !== 'string' || param === '') return null;
  const benefit = /^benefits\[\d+\]\.(platform|type|value)$/.exec(param);
  if (benefit) return `benefit_${benefit[1]}`;
  return param.replace(/\[\d+\].*$/, '');
}

/** A number typed in a form: digits become a number; anything else goes as typed, for the operation to refuse naming the field. */
function numberOf(v: unknown): unknown {
  if (typeof v !== 'string' || v.trim() === '') return undefined;
  return /^-?\d+(\.\d+)?$/.test(v.trim()) ? Number(v.trim()) : v.trim();
}
const textOf = (v: unknown): string | null => (typeof v === 'string' && v.trim() !== '' ? v.trim() : null);

/** Fields of a form body, without the empty ones (an absent field takes its default). */
function compact(body: Record<string, unknown>): Json {
  return Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined));
}

export function mountCatalog(router: Router, ctx: DashboardContext): void {
  const { run, read } = ctx;

  const catalogPage = async (req: Request, res: Response, problem?: FormProblem, status = 200) => {
    const s = req.signed!;
    const tiers = await read<Page>(req, res, 'list_plans');
    if (!tiers) return;
    const discounts = await run(req, 'list_discounts');
    const codes = discounts.problem ? [] : (discounts.body as Page).data;
    const file = await run(req, 'get_catalog_file');
    const canWrite = s.can('catalog:write');
    const manage = canWrite ? await manageSection(req, res, s, codes, problem) : html``;
    if (manage === null) return;
    res.status(status);
    send(req, res, 'Catalog', '/dashboard/catalog', html`<h2>Tiers and plans</h2>
${table(['Tier', 'Kind', 'Plans'], tiers.data.map((t) => [html`<strong>${t.name}</strong><br><span class="muted">${t.id}</span>`, html`${t.kind}`,
      html`${(t.plans as Json[]).map((p) => html`<div>${p.name ?? p.id}: ${money(p.amount_cents, p.currency)}${p.interval ? ` / ${p.interval}` : ' once'}${p.trial_days ? `, ${p.trial_days}-day trial` : ''}</div>`)}`]), 'No tiers yet.')}
<h2>Discount codes</h2>${table(['Code', 'Value', 'Duration', 'Redeemed', 'Active'], codes.map((d) => [html`<code>${d.code}</code>`,
      html`${d.value_type === 'percent' ? `${d.percent_off}% off` : money(d.amount_off_cents, d.currency) + ' off'}`, html`${d.duration}`, html`${d.redeemed_count}${d.use_limit ? ` of ${d.use_limit}` : ''}`, html`${d.is_active ? 'yes' : `no (${String(d.inactive_reason ?? 'disabled').replace('_', ' ')})`}`]), 'No discount codes.')}
${manage}
<h2>As a catalog file</h2>${file.problem ? html`<p class="muted">The catalog file needs the plans:read and discounts:read scopes.</p>` : html`<p>This file is the whole catalog: platforms, entitlements and their benefits, tiers (inactive ones too) with their plans, discount codes, the payment provider and the retry schedule, the seller its invoices name and its tax rates, by their keys. <code>billing catalog apply --community ID FILE</code> recreates it in an empty community (staging, a copy) and changes nothing when applied here. It holds no secrets: a Stripe account's keys are set in the file you apply (<code>secret_key</code>, <code>webhook_secret</code>), never exported.</p>
<pre><code id="catalog-file">${JSON.stringify(orderedCatalogFile(file.body as Json), null, 2)}</code></pre><p><button type="button" class="secondary" data-copy="catalog-file">Copy</button></p>`}`);
  };

  /** The forms, from the catalog with its keys (archived tiers and plans too). */
  const manageSection = async (req: Request, res: Response, s: Signed, codes: Json[], problem?: FormProblem): Promise<Html | null> => {
    const catalog = await read<{ tiers: Json[]; entitlements: Json[] }>(req, res, 'get_catalog');
    if (!catalog) return null;
    const platforms = await run(req, 'list_platform_configs');
    const connections = platforms.problem ? [] : (platforms.body as { data: Json[] }).data;
    const p = (form: string) => (problem?.form === form ? problem : undefined);
    return html`<h2>Change the catalog</h2>
<p>The same changes as the catalog file and <code>/v1/catalog</code>, with the same rules. Archived tiers and plans are no longer offered; what was sold stays. A new price is for new buyers: existing subscribers keep theirs until migrated with notice (<code>billing plans migrate</code>).</p>
${tierForm(s, 'add-tier', '/dashboard/catalog/tiers', 'Add a tier', catalog.entitlements, p('add-tier'))}
${catalog.tiers.map((t, i) => tierSection(s, t, i, catalog.entitlements, p))}
<h3>Entitlements</h3>
${catalog.entitlements.map((e, i) => entitlementSection(s, e, i, connections, p(`entitlement-${i}`)))}
${entitlementForm(s, connections, p('add-entitlement'))}
<h3>Discount codes</h3>
${codes.map((d, i) => discountSection(s, d, i, p(`discount-${i}`)))}
${discountForm(s, catalog.tiers, p('add-discount'))}`;
  };

  router.get('/catalog', (req, res) => catalogPage(req, res));

  /** Runs a form's operation: done, or the page again with the problem beside its field. */
  const save = async (req: Request, res: Response, form: string, name: string, input: { params?: Json; body?: Json; query?: Json }, values: Json, notice = 'catalog') => {
    const out: Outcome = await run(req, name, input);
    if (!out.problem) return void res.redirect(303, `/dashboard/catalog?done=${notice}`);
    if (out.status === 401 || out.status === 403 || out.status === 404 || form === 'archive') return problemPage(req, res, out, '/dashboard/catalog');
    const b = out.body as { detail?: string; title?: string; param?: string };
    const field = fieldOf(b.param) ?? (out.status === 409 ? (form.includes('discount') ? 'code' : 'key') : null);
    return catalogPage(req, res, { form, field, detail: b.detail ?? b.title ?? 'The request failed.', values, code: (b as { code?: string }).code }, out.status);
  };

  const tierBody = (b: Json): Json => compact({
    name: typeof b.name === 'string' ? b.name : undefined,
    description: textOf(b.description),
    kind: textOf(b.kind) ?? undefined,
    rank: numberOf(b.rank),
    entitlements: listField(b.entitlements),
  });

  router.post('/catalog/tiers', (req, res) => {
    const b = req.body as Json;
    return save(req, res, 'add-tier', 'create_catalog_tier', { body: { key: typeof b.key === 'string' ? b.key.trim() : b.key, ...tierBody(b) } }, b);
  });
  router.post('/catalog/tiers/:id', (req, res) => {
    const b = req.body as Json;
    const { kind: _kind, ...body } = tierBody(b);
    return save(req, res, `tier-${String(b.form ?? '')}`, 'update_catalog_tier', { params: { id: req.params.id }, body }, b);
  });
  router.post('/catalog/tiers/:id/archive', (req, res) => save(req, res, 'archive', 'archive_catalog_tier', { params: { id: req.params.id } }, {}, 'archived'));

  router.post('/catalog/plans', (req, res) => {
    const b = req.body as Json;
    const body = compact({
      key: typeof b.key === 'string' ? b.key.trim() : b.key, tier_id: b.tier_id, name: textOf(b.name),
      amount_cents: numberOf(b.amount_cents) ?? null, currency: typeof b.currency === 'string' ? b.currency.trim().toLowerCase() : b.currency,
      interval: textOf(b.interval), trial_days: numberOf(b.trial_days),
    });
    return save(req, res, `plan-${String(b.form ?? '')}`, 'create_catalog_plan', { body }, b);
  });
  router.post('/catalog/plans/:id/archive', (req, res) => save(req, res, 'archive', 'archive_catalog_plan', { params: { id: req.params.id } }, {}, 'archived'));
  // A plan's name and trial (its price has the review step below; its key, currency and
  // interval never change: what was sold stays as it was sold).
  router.post('/catalog/plans/:id', (req, res) => {
    const b = req.body as Json;
    const trial = typeof b.trial_days === 'string' && b.trial_days.trim() === '' ? 0 : numberOf(b.trial_days);
    const body = compact({ name: textOf(b.name) ?? null, trial_days: trial });
    return save(req, res, `plan-edit-${String(b.form ?? '')}`, 'update_catalog_plan', { params: { id: req.params.id }, body }, b);
  });

  // A new price: reviewed first (how many subscribers it concerns), saved on confirm.
  router.post('/catalog/plans/:id/price', async (req, res) => {
    const b = req.body as Json;
    const id = String(req.params.id);
    const form = `price-${String(b.form ?? '')}`;
    const amount = numberOf(b.amount_cents);
    if (b.confirm === 'yes') return save(req, res, form, 'update_catalog_plan', { params: { id }, body: { amount_cents: amount ?? null } }, b, 'price');
    const preview = await run(req, 'preview_catalog_plan_price', { params: { id }, query: { amount_cents: typeof b.amount_cents === 'string' ? b.amount_cents.trim() : '' } });
    if (preview.problem) {
      if (preview.status === 401 || preview.status === 403 || preview.status === 404) return problemPage(req, res, preview, '/dashboard/catalog');
      const pb = preview.body as { detail?: string; title?: string };
      return catalogPage(req, res, { form, field: 'amount_cents', detail: pb.detail ?? pb.title ?? 'Expected a price in minor units.', values: b }, preview.status);
    }
    const v = preview.body as Json;
    const s = req.signed!;
    const who = v.subscriptions === 1 ? '1 subscriber' : `${v.subscriptions} subscribers`;
    send(req, res, 'Review a price change', '/dashboard/catalog', html`<section aria-labelledby="review-title"><h2 id="review-title">From ${money(v.from_cents, v.currency)} to ${money(v.to_cents, v.currency)}</h2>
<p id="price-concerns" role="status"><strong>This change concerns ${who}</strong>${v.pending_migration ? ` (${v.pending_migration} of them with a price migration already pending)` : ''}. New buyers pay ${money(v.to_cents, v.currency)}; ${v.subscriptions === 0 ? 'no existing subscriber pays another price.' : `the ${who} keep${v.subscriptions === 1 ? 's' : ''} the price they pay until you migrate them with notice (<code>billing plans migrate</code>).`}</p>
<form method="post" action="/dashboard/catalog/plans/${encodeURIComponent(id)}/price">${csrfField(s)}<input type="hidden" name="amount_cents" value="${String(v.to_cents)}"><input type="hidden" name="confirm" value="yes"><input type="hidden" name="form" value="${String(b.form ?? '')}">
<p><button type="submit">Save the new price</button> <a href="/dashboard/catalog">Cancel</a></p></form></section>`);
  });

  router.post('/catalog/entitlements', (req, res) => {
    const b = req.body as Json;
    const benefit = textOf(b.benefit_platform) || textOf(b.benefit_type) || textOf(b.benefit_value)
      ? [{ platform: textOf(b.benefit_platform) ?? '', type: textOf(b.benefit_type) ?? '', value: textOf(b.benefit_value) ?? '' }] : [];
    return save(req, res, 'add-entitlement', 'create_catalog_entitlement', { body: { key: typeof b.key === 'string' ? b.key.trim() : b.key, name: b.name, benefits: benefit } }, b);
  });

  router.post('/catalog/entitlements/:id', (req, res) => {
    const b = req.body as Json;
    // The benefits kept (their boxes ticked) and the one added, if any: they become exactly these.
    const kept = listField(b.keep).map((k) => { try { return JSON.parse(String(k)) as unknown; } catch { return null; } })
      .filter((k): k is Json => k !== null && typeof k === 'object' && !Array.isArray(k));
    const added = textOf(b.benefit_platform) || textOf(b.benefit_type) || textOf(b.benefit_value)
      ? [{ platform: textOf(b.benefit_platform) ?? '', type: textOf(b.benefit_type) ?? '', value: textOf(b.benefit_value) ?? '' }] : [];
    return save(req, res, `entitlement-${String(b.form ?? '')}`, 'update_catalog_entitlement',
      { params: { id: req.params.id }, body: { name: b.name, benefits: [...kept, ...added] } }, b);
  });

  router.post('/catalog/discounts/:id', (req, res) => {
    const b = req.body as Json;
    const body = compact({ name: textOf(b.name), use_limit: numberOf(b.use_limit) ?? null, expires_at: textOf(b.expires_at), is_active: b.is_active === 'true' });
    return save(req, res, `discount-${String(b.form ?? '')}`, 'update_catalog_discount', { params: { id: req.params.id }, body }, b);
  });

  router.post('/catalog/discounts', (req, res) => {
    const b = req.body as Json;
    const type = textOf(b.value_type);
    const body = compact({
      code: typeof b.code === 'string' ? b.code.trim() : b.code, name: textOf(b.name), value_type: type ?? undefined,
      percent_off: type === 'percent' ? numberOf(b.percent_off) : undefined,
      amount_off_cents: type === 'amount' ? numberOf(b.amount_off_cents) : undefined,
      currency: type === 'amount' ? textOf(b.currency)?.toLowerCase() : undefined,
      duration: textOf(b.duration) ?? undefined, duration_months: numberOf(b.duration_months), use_limit: numberOf(b.use_limit),
      expires_at: textOf(b.expires_at) ?? undefined, tiers: listField(b.tiers),
    });
    return save(req, res, 'add-discount', 'create_catalog_discount', { body }, b);
  });
  router.post('/catalog/discounts/:id/archive', (req, res) => save(req, res, 'archive', 'archive_catalog_discount', { params: { id: req.params.id } }, {}, 'archived'));
}

// ---- the forms ---------------------------------------------------------------------------

/** The problem beside its field, without the field's name the database puts first ('interval: expected ...'). */
const problemOf = (field: string, p?: FormProblem) => (p && p.field === field ? p.detail.replace(/^[A-Za-z0-9_.[\]]+: /, '') : null);
const describedBy = (id: string, field: string, p?: FormProblem) => raw(problemOf(field, p) ? ` aria-invalid="true" aria-describedby="${id}-${field}-problem"` : '');
const fieldProblem = (id: string, field: string, p?: FormProblem) => {
  const why = problemOf(field, p);
  return why ? html` <span class="error" id="${id}-${field}-problem" role="alert" data-problem="${p?.code ?? ''}">${why}</span>` : html``;
};
/** A problem naming no field of the form: above the form's fields. */
const generalProblem = (id: string, fields: string[], p?: FormProblem) => (p && !(p.field && fields.includes(p.field))
  ? html`<p class="error" id="${id}-problem" role="alert" data-problem="${p.code ?? ''}">${p.detail}</p>` : html``);
const valueOf = (p: FormProblem | undefined, field: string, fallback: unknown = '') => {
  const v = p ? p.values[field] : fallback;
  return v === null || v === undefined ? '' : String(v);
};

function input(id: string, field: string, label: string, p: FormProblem | undefined, opts: { value?: unknown; type?: string; hint?: string; required?: boolean } = {}): Html {
  const hint = opts.hint ? html` <span class="muted" id="${id}-${field}-hint">${opts.hint}</span>` : html``;
  const why = problemOf(field, p);
  const described = [opts.hint ? `${id}-${field}-hint` : '', why ? `${id}-${field}-problem` : ''].filter(Boolean).join(' ');
  return html`<p><label for="${id}-${field}">${label}</label><input id="${id}-${field}" name="${field}" type="${opts.type ?? 'text'}" value="${valueOf(p, field, opts.value)}"${raw(opts.required ? ' required' : '')}${raw(described ? ` aria-describedby="${described}"` : '')}${raw(why ? ' aria-invalid="true"' : '')}>${hint}${fieldProblem(id, field, p)}</p>`;
}

function select(id: string, field: string, label: string, options: [string, string][], p: FormProblem | undefined, current = ''): Html {
  const chosen = p ? String(p.values[field] ?? '') : current;
  return html`<p><label for="${id}-${field}">${label}</label><select id="${id}-${field}" name="${field}"${describedBy(id, field, p)}>${options.map(([v, l]) => html`<option value="${v}"${raw(v === chosen ? ' selected' : '')}>${l}</option>`)}</select>${fieldProblem(id, field, p)}</p>`;
}

function checkboxes(id: string, field: string, legend: string, options: [string, string][], p: FormProblem | undefined, checked: string[]): Html {
  if (options.length === 0) return html``;
  const chosen = p ? listField(p.values[field]).map(String) : checked;
  const why = problemOf(field, p);
  return html`<fieldset${raw(why ? ` aria-describedby="${id}-${field}-problem"` : '')}><legend>${legend}</legend>${options.map(([v, l], i) => html`<label for="${id}-${field}-${i}"><input type="checkbox" id="${id}-${field}-${i}" name="${field}" value="${v}"${raw(chosen.includes(v) ? ' checked' : '')}> ${l}</label> `)}${fieldProblem(id, field, p)}</fieldset>`;
}

const TIER_FIELDS = ['key', 'name', 'description', 'kind', 'rank', 'entitlements'];

function tierForm(s: Signed, id: string, action: string, legend: string, entitlements: Json[], p?: FormProblem, tier?: Json, formIndex?: number): Html {
  return html`<form method="post" action="${action}" novalidate data-form="${id}">${csrfField(s)}${formIndex !== undefined ? html`<input type="hidden" name="form" value="${String(formIndex)}">` : ''}<fieldset><legend>${legend}</legend>
${generalProblem(id, TIER_FIELDS, p)}
${tier ? '' : input(id, 'key', 'Key', p, { required: true, hint: 'Letters, digits, "_", ".", ":" or "-"; never changes.' })}
${input(id, 'name', 'Name', p, { value: tier?.name, required: true })}
${input(id, 'description', 'Description', p, { value: tier?.description })}
${tier ? '' : select(id, 'kind', 'Kind', [['subscription', 'subscription (recurring plans)'], ['one_time', 'one_time (one-time plans)']], p)}
${input(id, 'rank', 'Rank', p, { value: tier?.rank ?? '', type: 'text', hint: 'Higher is an upgrade.' })}
${checkboxes(id, 'entitlements', 'Entitlements it gives', entitlements.map((e) => [e.key, e.name]), p, (tier?.entitlements as string[] | undefined) ?? [])}
<p><button type="submit">${tier ? `Save ${String(tier.name)}` : 'Add tier'}</button></p></fieldset></form>`;
}

const PLAN_FIELDS = ['key', 'name', 'amount_cents', 'currency', 'interval', 'trial_days', 'tier_id'];

/** A plan's name and trial days, edited in place (a trial applies to new subscriptions). */
function planEditForm(s: Signed, pl: Json, id: string, formIndex: string, p?: FormProblem): Html {
  const label = String(pl.name ?? pl.key);
  return html`<form method="post" action="/dashboard/catalog/plans/${encodeURIComponent(String(pl.id))}" novalidate data-form="${id}">${csrfField(s)}<input type="hidden" name="form" value="${formIndex}">
${generalProblem(id, ['name', 'trial_days'], p)}${input(id, 'name', `Name of ${label}`, p, { value: pl.name })}
${input(id, 'trial_days', `Trial days of ${label}`, p, { value: pl.trial_days ?? '', hint: 'For new subscriptions; empty for none.' })}<p><button type="submit">Save ${label}</button></p></form>`;
}

function tierSection(s: Signed, t: Json, i: number, entitlements: Json[], p: (form: string) => FormProblem | undefined): Html {
  const planProblem = p(`plan-${i}`);
  const open = p(`tier-${i}`) || planProblem || (t.plans as Json[]).some((_pl, pi) => p(`price-${i}-${pi}`) || p(`plan-edit-${i}-${pi}`));
  const recurring = t.billing_mode === 'recurring';
  return html`<details${raw(open ? ' open' : '')} data-tier="${t.key}"><summary>${t.name} <span class="muted">(${t.key}${t.active ? '' : ', archived'})</span></summary>
${tierForm(s, `tier-${i}`, `/dashboard/catalog/tiers/${encodeURIComponent(t.id)}`, `Edit ${String(t.name)}`, entitlements, p(`tier-${i}`), t, i)}
${t.active ? actionForm(s, `/dashboard/catalog/tiers/${encodeURIComponent(t.id)}/archive`, `Archive ${String(t.name)}`, { danger: true }) : ''}
<h3>Plans of ${t.name}</h3>
${table(['Plan', 'Price', 'Change the price', ''], (t.plans as Json[]).map((pl, pi) => {
    const id = `price-${i}-${pi}`;
    const pp = p(id);
    return [html`<strong>${pl.name ?? pl.key}</strong><br><span class="muted">${pl.key}${pl.active ? '' : ', archived'}</span>`,
      html`${money(pl.amount_cents, pl.currency)}${pl.interval ? ` / ${pl.interval}` : ' once'}${pl.trial_days ? `, ${pl.trial_days}-day trial` : ''}`,
      html`<form method="post" action="/dashboard/catalog/plans/${encodeURIComponent(pl.id)}/price" novalidate data-plan="${pl.key}">${csrfField(s)}<input type="hidden" name="form" value="${i}-${pi}">
${generalProblem(id, ['amount_cents'], pp)}${input(id, 'amount_cents', `New price of ${String(pl.name ?? pl.key)} (minor units)`, pp, { value: pl.amount_cents })}<p><button type="submit">Review the change</button></p></form>
${planEditForm(s, pl, `plan-edit-${i}-${pi}`, `${i}-${pi}`, p(`plan-edit-${i}-${pi}`))}`,
      pl.active ? actionForm(s, `/dashboard/catalog/plans/${encodeURIComponent(pl.id)}/archive`, `Archive ${String(pl.name ?? pl.key)}`, { danger: true }) : html`archived`];
  }), 'No plans yet.')}
<form method="post" action="/dashboard/catalog/plans" novalidate data-form="plan-${i}">${csrfField(s)}<input type="hidden" name="tier_id" value="${t.id}"><input type="hidden" name="form" value="${String(i)}">
<fieldset><legend>Add a plan to ${t.name}</legend>
${generalProblem(`plan-${i}`, PLAN_FIELDS, planProblem)}
${input(`plan-${i}`, 'key', 'Key', planProblem, { required: true })}
${input(`plan-${i}`, 'name', 'Name', planProblem)}
${input(`plan-${i}`, 'amount_cents', 'Price (minor units, e.g. 1000 for 10.00)', planProblem, { required: true })}
${input(`plan-${i}`, 'currency', 'Currency', planProblem, { value: 'usd', required: true, hint: 'Three lowercase letters, e.g. usd.' })}
${select(`plan-${i}`, 'interval', 'Interval', recurring ? [['month', 'month'], ['year', 'year'], ['', 'none (one-time)']] : [['', 'none (one-time)'], ['month', 'month'], ['year', 'year']], planProblem, recurring ? 'month' : '')}
${input(`plan-${i}`, 'trial_days', 'Trial days', planProblem)}
<p><button type="submit">Add plan</button></p></fieldset></form></details>`;
}

const ENTITLEMENT_FIELDS = ['key', 'name', 'benefit_platform', 'benefit_type', 'benefit_value'];

function benefitFields(id: string, connections: Json[], p: FormProblem | undefined, legend: string): Html {
  if (connections.length === 0) return html``;
  return html`<fieldset><legend>${legend}</legend>
${select(id, 'benefit_platform', 'Connection', [['', 'none'], ...connections.map((c): [string, string] => [c.key, `${c.name ?? c.key} (${c.platform})`])], p)}
${input(id, 'benefit_type', 'Type', p, { hint: 'Discord: role or channel; Telegram: chat.' })}
${input(id, 'benefit_value', 'Value', p, { hint: 'The role, channel or chat id.' })}</fieldset>`;
}

function entitlementForm(s: Signed, connections: Json[], p?: FormProblem): Html {
  const id = 'add-entitlement';
  return html`<form method="post" action="/dashboard/catalog/entitlements" novalidate data-form="${id}">${csrfField(s)}<fieldset><legend>Add an entitlement</legend>
${generalProblem(id, ENTITLEMENT_FIELDS, p)}
${input(id, 'key', 'Key', p, { required: true })}
${input(id, 'name', 'Name', p, { required: true })}
${benefitFields(id, connections, p, 'A benefit (optional)')}
<p><button type="submit">Add entitlement</button></p></fieldset></form>`;
}

function entitlementSection(s: Signed, e: Json, i: number, connections: Json[], p?: FormProblem): Html {
  const id = `entitlement-${i}`;
  const benefits = e.benefits as Json[];
  return html`<details${raw(p ? ' open' : '')} data-entitlement="${e.key}"><summary>${e.name} <span class="muted">(${e.key}; ${benefits.length === 1 ? '1 benefit' : `${benefits.length} benefits`})</span></summary>
<form method="post" action="/dashboard/catalog/entitlements/${encodeURIComponent(e.id)}" novalidate data-form="${id}">${csrfField(s)}<input type="hidden" name="form" value="${String(i)}"><fieldset><legend>Edit ${e.name}</legend>
${generalProblem(id, ENTITLEMENT_FIELDS, p)}
${input(id, 'name', 'Name', p, { value: e.name, required: true })}
${benefits.length ? html`<fieldset><legend>Benefits kept (untick to remove)</legend>${benefits.map((b, bi) => html`<label for="${id}-keep-${bi}"><input type="checkbox" id="${id}-keep-${bi}" name="keep" value="${JSON.stringify({ platform: b.platform, type: b.type, value: b.value })}" checked> ${b.platform}: ${b.type} ${b.value}</label> `)}</fieldset>` : ''}
${benefitFields(id, connections, p, 'Add a benefit (optional)')}
<p><button type="submit">Save ${e.name}</button></p></fieldset></form></details>`;
}

function discountSection(s: Signed, d: Json, i: number, p?: FormProblem): Html {
  const id = `discount-${i}`;
  return html`<details${raw(p ? ' open' : '')} data-discount="${d.code}"><summary><code>${d.code}</code> <span class="muted">(${d.is_active ? 'active' : `not active: ${String(d.inactive_reason ?? 'disabled').replace('_', ' ')}`})</span></summary>
<form method="post" action="/dashboard/catalog/discounts/${encodeURIComponent(d.id)}" novalidate data-form="${id}">${csrfField(s)}<input type="hidden" name="form" value="${String(i)}"><fieldset><legend>Edit ${d.code}</legend>
${generalProblem(id, ['name', 'use_limit', 'expires_at', 'is_active'], p)}
${input(id, 'name', 'Name', p, { value: d.name })}
${input(id, 'use_limit', 'Use limit', p, { value: d.use_limit })}
${input(id, 'expires_at', 'Expires at', p, { value: d.expires_at, hint: 'RFC 3339, e.g. 2027-01-01T00:00:00Z; blank: never.' })}
<p><label for="${id}-is_active"><input type="checkbox" id="${id}-is_active" name="is_active" value="true"${raw((p ? p.values.is_active === 'true' : d.inactive_reason !== 'disabled') ? ' checked' : '')}> Turned on (redeemable while its dates and limit allow)</label></p>
<p><button type="submit">Save ${d.code}</button></p></fieldset></form>
${actionForm(s, `/dashboard/catalog/discounts/${encodeURIComponent(d.id)}/archive`, `Archive ${String(d.code)}`, { danger: true })}</details>`;
}

const DISCOUNT_FIELDS = ['code', 'name', 'value_type', 'percent_off', 'amount_off_cents', 'currency', 'duration', 'duration_months', 'use_limit', 'expires_at', 'tiers'];

function discountForm(s: Signed, tiers: Json[], p?: FormProblem): Html {
  const id = 'add-discount';
  return html`<form method="post" action="/dashboard/catalog/discounts" novalidate data-form="${id}">${csrfField(s)}<fieldset><legend>Add a discount code</legend>
${generalProblem(id, DISCOUNT_FIELDS, p)}
${input(id, 'code', 'Code', p, { required: true, hint: '1 to 64 letters, digits, "_" or "-"; buyers type it in any case.' })}
${input(id, 'name', 'Name', p)}
${select(id, 'value_type', 'Value', [['percent', 'a percentage off'], ['amount', 'an amount off']], p)}
${input(id, 'percent_off', 'Percent off', p, { hint: 'For a percentage: above 0, at most 100.' })}
${input(id, 'amount_off_cents', 'Amount off (minor units)', p, { hint: 'For an amount, with its currency.' })}
${input(id, 'currency', 'Currency of the amount', p)}
${select(id, 'duration', 'Duration', [['once', 'once'], ['repeating', 'repeating (some months)'], ['forever', 'forever']], p)}
${input(id, 'duration_months', 'Months (repeating only)', p)}
${input(id, 'use_limit', 'Use limit', p)}
${input(id, 'expires_at', 'Expires at', p, { hint: 'RFC 3339, e.g. 2027-01-01T00:00:00Z; blank: never.' })}
${checkboxes(id, 'tiers', 'Only for these tiers (none: any)', tiers.filter((t) => t.active).map((t) => [t.key, t.name]), p, [])}
<p><button type="submit">Add discount code</button></p></fieldset></form>`;
}
