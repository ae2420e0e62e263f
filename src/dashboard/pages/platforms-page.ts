// Platforms (issue 29 items 1 and 5): each Discord or Telegram connection with its health
// (whether a bot token is set, never the token; the last call that worked and the last
// that did not; the benefits waiting per status), and the log of calls made, newest
// first, optionally of one connection. Operators who may (keys:write: admins, owners)
// add a connection and edit one here, as platforms[] of `billing catalog apply` does:
// its secrets through write-only password fields, never filled in or shown back (a
// blank field keeps the stored one). A refused form is shown again with the problem
// beside its field (the database names it: billing.platform_settings_problem).
import type { Request, Response, Router } from 'express';
import { Html, html, raw } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { csrfField, Json, memberLink, nextLink, Page, problemPage, queryOf, send, table } from '../dashboard-layout';
import type { Outcome } from '../../operations/executor';
import type { Signed } from '../dashboard-session';

/** A form refused: which one ('add' or a connection's id), its field, the problem, what was entered (never a secret). */
interface FormProblem { form: string; param: string | null; detail: string; values: Json }

const DISCORD_FIELDS = [
  ['guild_id', 'Server id (guild_id)'], ['client_id', 'Application id (client_id)'], ['public_key', 'Public key (public_key)'],
] as const;
const FIELDS = new Set(['key', 'platform', 'name', 'guild_id', 'client_id', 'public_key', 'kick_on_revoke', 'chat_id', 'bot_token', 'client_secret']);

/** The form's field a problem's param names ("settings.guild_id": guild_id), or null. */
const fieldOf = (param: unknown): string | null => {
  if (typeof param !== 'string') return null;
  const f = param.replace(/^settings\./, '');
  return FIELDS.has(f) ? f : null;
};

/** The connection's settings from a form: the platform's fields that are filled in. */
function settingsOf(platform: unknown, b: Json): Record<string, string> {
  const out: Record<string, string> = {};
  const names = platform === 'discord' ? ['guild_id', 'client_id', 'public_key'] : platform === 'telegram' ? ['chat_id'] : [];
  for (const n of names) if (typeof b[n] === 'string' && b[n].trim() !== '') out[n] = b[n].trim();
  if (platform === 'discord' && b.kick_on_revoke === 'true') out.kick_on_revoke = 'true';
  return out;
}

/** A secret from a form: a new value, null (remove ticked), or undefined (blank: keep). */
function secretOf(b: Json, name: 'bot_token' | 'client_secret'): { value?: string | null; both?: boolean } {
  const given = typeof b[name] === 'string' && b[name] !== '' ? b[name] as string : undefined;
  const remove = b[`remove_${name}`] === 'true';
  if (given !== undefined && remove) return { both: true };
  return { value: remove ? null : given };
}

export function mountPlatforms(router: Router, ctx: DashboardContext): void {
  const { read, run, config } = ctx;
  const platformsPage = async (req: Request, res: Response, problem?: FormProblem, status = 200) => {
    const s = req.signed!;
    const conns = await read<{ data: Json[] }>(req, res, 'list_platform_connections');
    if (!conns) return;
    const actions = await read<Page>(req, res, 'list_platform_actions', { query: queryOf(req, ['platform_config_id']) });
    if (!actions) return;
    const canWrite = s.can('keys:write');
    const configs = canWrite ? await read<{ data: Json[] }>(req, res, 'list_platform_configs') : { data: [] };
    if (!configs) return;
    const names = new Map(conns.data.map((c) => [c.id as string, (c.name ?? c.key) as string]));
    const token = (c: Json) => c.bot_token_set ? 'set (its own)'
      : (c.platform === 'discord' ? config.discordBotToken : config.telegramBotToken)
        ? `the deployment's (${c.platform === 'discord' ? 'DISCORD_BOT_TOKEN' : 'TELEGRAM_BOT_TOKEN'})` : 'none: deliveries wait (action required)';
    const waiting = (w: Json) => html`${w.pending} pending, ${w.failed} failed, ${w.action_required > 0 ? html`<strong>${w.action_required} action required</strong>` : '0 action required'}`;
    const current = typeof req.query.platform_config_id === 'string' ? req.query.platform_config_id : '';
    res.status(status);
    send(req, res, 'Platforms', '/dashboard/platforms', html`<p>Connections are set in the catalog (<code>platforms[]</code>, <code>billing catalog apply</code>)${canWrite ? ' or below' : ''}; see docs/platforms.md. A member's page shows each benefit's delivery and retries it.</p>
<h2>Connections</h2>${table(['Connection', 'Platform', 'Server or chat', 'Bot token', 'Last success', 'Last error', 'Benefits waiting'], conns.data.map((c) => [
      html`<strong>${c.name ?? c.key}</strong><br><span class="muted">${c.key} · ${c.id}</span>`, html`${c.platform}`,
      html`${c.platform === 'discord' ? `guild ${c.guild_id ?? '—'}` : `chat ${c.chat_id ?? '—'}`}`, html`${token(c)}`,
      c.last_success ? html`${c.last_success.at}<br><span class="muted">${c.last_success.action}</span>` : html`never`,
      c.last_error ? html`${c.last_error.at} · ${c.last_error.action}${c.last_error.status_code ? ` (HTTP ${c.last_error.status_code})` : ''}<br>${c.last_error.error ?? c.last_error.outcome}` : html`none`,
      waiting(c.waiting)]), 'No platform connections: add a Discord server or a Telegram chat to the catalog.')}
${canWrite ? configureSection(s, configs.data, problem) : ''}
<h2>Recent actions</h2><form class="filters" method="get" action="/dashboard/platforms"><div><label for="f-pcfg">Connection</label>
<select id="f-pcfg" name="platform_config_id"><option value="">any</option>${conns.data.map((c) => html`<option value="${c.id}"${raw(c.id === current ? ' selected' : '')}>${c.name ?? c.key}</option>`)}</select></div>
<div><button type="submit">Filter</button></div></form>
${table(['When', 'Connection', 'Member', 'Action', 'Target', 'Outcome', 'Error'], actions.data.map((a) => [html`${a.created_at}`, html`${names.get(a.platform_config_id) ?? a.platform_config_id}`,
      memberLink(a.member_id), html`${a.action}`, html`<code>${a.target}</code>`, html`${a.outcome}${a.status_code ? ` (HTTP ${a.status_code})` : ''}`, html`${a.error ?? ''}`]),
      'No calls made to the platforms yet.')}${nextLink(req, actions.next_cursor)}`);
  };

  router.get('/platforms', (req, res) => platformsPage(req, res));

  /** Runs a form's operation: done, the page again with the problem beside its field, or (refused, signed out) the problem page. */
  const save = async (req: Request, res: Response, form: string, name: string, input: { params?: Json; body: Json }, values: Json,
    secrets: Record<string, { both?: boolean }>) => {
    const both = Object.entries(secrets).find(([, v]) => v.both);
    if (both) {
      return platformsPage(req, res, { form, param: both[0], detail: 'Enter a new one or tick Remove, not both.', values }, 422);
    }
    const out: Outcome = await run(req, name, input);
    if (!out.problem) return void res.redirect(303, '/dashboard/platforms?done=platform');
    if (out.status === 401 || out.status === 403 || out.status === 404) return problemPage(req, res, out, '/dashboard/platforms');
    const p = out.body as { detail?: string; title?: string; param?: string };
    platformsPage(req, res, { form, param: fieldOf(p.param) ?? (out.status === 409 ? 'key' : null), detail: p.detail ?? p.title ?? 'The request failed.', values }, out.status);
  };

  router.post('/platforms', (req, res) => {
    const b = req.body as Json;
    const platform = b.platform;
    const token = secretOf(b, 'bot_token');
    const clientSecret = platform === 'discord' ? secretOf(b, 'client_secret') : {};
    const body: Json = { key: typeof b.key === 'string' ? b.key.trim() : b.key, platform, name: typeof b.name === 'string' && b.name.trim() ? b.name.trim() : null,
      settings: settingsOf(platform, b) };
    if (token.value !== undefined) body.bot_token = token.value;
    if (clientSecret.value !== undefined) body.client_secret = clientSecret.value;
    const values = { key: b.key, platform, name: b.name, ...body.settings };
    return save(req, res, 'add', 'create_platform_connection', { body }, values, { bot_token: token, client_secret: clientSecret });
  });

  router.post('/platforms/:id', (req, res) => {
    const b = req.body as Json;
    const id = String(req.params.id);
    const platform = b.platform === 'discord' || b.platform === 'telegram' ? b.platform : null;
    const token = secretOf(b, 'bot_token');
    const clientSecret = platform === 'discord' ? secretOf(b, 'client_secret') : {};
    const body: Json = { name: typeof b.name === 'string' && b.name.trim() ? b.name.trim() : null };
    // The platform a form was drawn for picks its settings fields; the database keeps the stored platform.
    if (platform) body.settings = settingsOf(platform, b);
    if (token.value !== undefined) body.bot_token = token.value;
    if (clientSecret.value !== undefined) body.client_secret = clientSecret.value;
    const values = { name: b.name, ...body.settings };
    return save(req, res, id, 'update_platform_connection', { params: { id }, body }, values, { bot_token: token, client_secret: clientSecret });
  });
}

/** The forms: add a connection, and edit each one (its name, settings and secrets). */
function configureSection(s: Signed, configs: Json[], problem?: FormProblem): Html {
  const add = problem?.form === 'add' ? problem : undefined;
  return html`<h2>Configure</h2>
<form method="post" action="/dashboard/platforms" novalidate>${csrfField(s)}<fieldset><legend>Add a connection</legend>
${generalProblem('add', add)}
${textField('add', 'key', 'Key', add?.values.key, add, { required: true })}
<p><label for="add-platform">Platform</label><select id="add-platform" name="platform"${describedBy('add', 'platform', add)}>${['discord', 'telegram'].map((p) => html`<option${raw(p === (add?.values.platform ?? 'discord') ? ' selected' : '')}>${p}</option>`)}</select>${fieldProblem('add', 'platform', add)}</p>
${textField('add', 'name', 'Name', add?.values.name, add)}
${discordFields('add', add?.values ?? {}, add)}
${telegramFields('add', add?.values ?? {}, add)}
${secretField('add', 'bot_token', 'Bot token', false, add)}
${secretField('add', 'client_secret', 'Discord OAuth2 client secret', false, add)}
<p><button type="submit">Add connection</button></p></fieldset></form>
${configs.map((c, i) => {
    const form = `c${i}`;
    const p = problem?.form === c.id ? problem : undefined;
    const values: Json = p ? p.values : { name: c.name, ...c.settings };
    const secrets = `${c.bot_token_set ? 'bot token set' : 'no bot token of its own'}${c.platform === 'discord' ? `, ${c.client_secret_set ? 'client secret set' : 'no client secret'}` : ''}`;
    return html`<details${raw(p ? ' open' : '')}><summary>Edit ${c.name ?? c.key} <span class="muted">(${c.key}, ${c.platform})</span></summary>
<form method="post" action="/dashboard/platforms/${encodeURIComponent(c.id)}" novalidate data-connection="${c.key}">${csrfField(s)}<input type="hidden" name="platform" value="${c.platform}">
<fieldset><legend>${c.name ?? c.key}</legend><p class="muted" data-testid="secrets-${c.key}">${secrets}</p>
${generalProblem(form, p)}
${textField(form, 'name', 'Name', values.name, p)}
${c.platform === 'discord' ? discordFields(form, values, p) : telegramFields(form, values, p)}
${secretField(form, 'bot_token', 'Bot token', c.bot_token_set, p)}
${c.platform === 'discord' ? secretField(form, 'client_secret', 'Discord OAuth2 client secret', c.client_secret_set, p) : ''}
<p><button type="submit">Save ${c.name ?? c.key}</button></p></fieldset></form></details>`;
  })}`;
}

const problemOf = (field: string, p?: FormProblem) => (p && p.param === field ? p.detail.replace(/^settings\.[a-z_]+: /, '').replace(/^[a-z_]+: /, '') : null);
const describedBy = (form: string, field: string, p?: FormProblem) => raw(problemOf(field, p) ? ` aria-invalid="true" aria-describedby="${form}-${field}-problem"` : '');
const fieldProblem = (form: string, field: string, p?: FormProblem) => {
  const why = problemOf(field, p);
  return why ? html` <span class="error" id="${form}-${field}-problem" role="alert">${why}</span>` : html``;
};
const generalProblem = (form: string, p?: FormProblem) => (p && !p.param ? html`<p class="error" id="${form}-problem" role="alert">${p.detail}</p>` : html``);

function textField(form: string, field: string, label: string, value: unknown, p?: FormProblem, opts: { required?: boolean } = {}): Html {
  return html`<p><label for="${form}-${field}">${label}</label><input id="${form}-${field}" name="${field}" value="${typeof value === 'string' ? value : ''}"${raw(opts.required ? ' required' : '')}${describedBy(form, field, p)}>${fieldProblem(form, field, p)}</p>`;
}

function discordFields(form: string, values: Json, p?: FormProblem): Html {
  return html`<fieldset><legend>Discord settings</legend>
${DISCORD_FIELDS.map(([field, label]) => textField(form, field, label, values[field], p))}
<p><label for="${form}-kick_on_revoke"><input type="checkbox" id="${form}-kick_on_revoke" name="kick_on_revoke" value="true"${raw(values.kick_on_revoke === 'true' ? ' checked' : '')}${describedBy(form, 'kick_on_revoke', p)}> Remove a member from the server when their last benefit on it is revoked (kick_on_revoke)</label>${fieldProblem(form, 'kick_on_revoke', p)}</p></fieldset>`;
}

function telegramFields(form: string, values: Json, p?: FormProblem): Html {
  return html`<fieldset><legend>Telegram settings</legend>${textField(form, 'chat_id', 'Chat id or @channelname (chat_id)', values.chat_id, p)}</fieldset>`;
}

/** A write-only secret: never filled in; blank keeps the stored one; Remove removes it. */
function secretField(form: string, field: 'bot_token' | 'client_secret', label: string, stored: boolean, p?: FormProblem): Html {
  const hint = stored ? 'Stored: leave blank to keep it, or enter a new one to replace it.' : 'Not stored: enter one to set it.';
  const why = problemOf(field, p);
  return html`<p><label for="${form}-${field}">${label}</label><input id="${form}-${field}" name="${field}" type="password" autocomplete="new-password" spellcheck="false" value=""
 aria-describedby="${form}-${field}-hint${why ? ` ${form}-${field}-problem` : ''}"${raw(why ? ' aria-invalid="true"' : '')}> <span class="muted" id="${form}-${field}-hint">${hint}</span>${fieldProblem(form, field, p)}</p>
${stored ? html`<p><label for="${form}-remove_${field}"><input type="checkbox" id="${form}-remove_${field}" name="remove_${field}" value="true"> Remove the stored ${label.toLowerCase().replace('discord oauth2 ', '')}</label></p>` : ''}`;
}
