// Platforms (issue 29 item 5): each Discord or Telegram connection with its health
// (whether a bot token is set, never the token; the last call that worked and the last
// that did not; the benefits waiting per status), and the log of calls made, newest
// first, optionally of one connection.
import type { Router } from 'express';
import { html, raw } from '../../web/html';
import type { DashboardContext } from '../dashboard-context';
import { Json, memberLink, nextLink, Page, queryOf, send, table } from '../dashboard-layout';

export function mountPlatforms(router: Router, ctx: DashboardContext): void {
  const { read, config } = ctx;
  router.get('/platforms', async (req, res) => {
    const conns = await read<{ data: Json[] }>(req, res, 'list_platform_connections');
    if (!conns) return;
    const actions = await read<Page>(req, res, 'list_platform_actions', { query: queryOf(req, ['platform_config_id']) });
    if (!actions) return;
    const names = new Map(conns.data.map((c) => [c.id as string, (c.name ?? c.key) as string]));
    const token = (c: Json) => c.bot_token_set ? 'set (its own)'
      : (c.platform === 'discord' ? config.discordBotToken : config.telegramBotToken)
        ? `the deployment's (${c.platform === 'discord' ? 'DISCORD_BOT_TOKEN' : 'TELEGRAM_BOT_TOKEN'})` : 'none: deliveries wait (action required)';
    const waiting = (w: Json) => html`${w.pending} pending, ${w.failed} failed, ${w.action_required > 0 ? html`<strong>${w.action_required} action required</strong>` : '0 action required'}`;
    const current = typeof req.query.platform_config_id === 'string' ? req.query.platform_config_id : '';
    send(req, res, 'Platforms', '/dashboard/platforms', html`<p>Connections are set in the catalog (<code>platforms[]</code>, <code>billing catalog apply</code>); see docs/platforms.md. A member's page shows each benefit's delivery and retries it.</p>
<h2>Connections</h2>${table(['Connection', 'Platform', 'Server or chat', 'Bot token', 'Last success', 'Last error', 'Benefits waiting'], conns.data.map((c) => [
      html`<strong>${c.name ?? c.key}</strong><br><span class="muted">${c.key} · ${c.id}</span>`, html`${c.platform}`,
      html`${c.platform === 'discord' ? `guild ${c.guild_id ?? '—'}` : `chat ${c.chat_id ?? '—'}`}`, html`${token(c)}`,
      c.last_success ? html`${c.last_success.at}<br><span class="muted">${c.last_success.action}</span>` : html`never`,
      c.last_error ? html`${c.last_error.at} · ${c.last_error.action}${c.last_error.status_code ? ` (HTTP ${c.last_error.status_code})` : ''}<br>${c.last_error.error ?? c.last_error.outcome}` : html`none`,
      waiting(c.waiting)]), 'No platform connections: add a Discord server or a Telegram chat to the catalog.')}
<h2>Recent actions</h2><form class="filters" method="get" action="/dashboard/platforms"><div><label for="f-pcfg">Connection</label>
<select id="f-pcfg" name="platform_config_id"><option value="">any</option>${conns.data.map((c) => html`<option value="${c.id}"${raw(c.id === current ? ' selected' : '')}>${c.name ?? c.key}</option>`)}</select></div>
<div><button type="submit">Filter</button></div></form>
${table(['When', 'Connection', 'Member', 'Action', 'Target', 'Outcome', 'Error'], actions.data.map((a) => [html`${a.created_at}`, html`${names.get(a.platform_config_id) ?? a.platform_config_id}`,
      memberLink(a.member_id), html`${a.action}`, html`<code>${a.target}</code>`, html`${a.outcome}${a.status_code ? ` (HTTP ${a.status_code})` : ''}`, html`${a.error ?? ''}`]),
      'No calls made to the platforms yet.')}${nextLink(req, actions.next_cursor)}`);
  });
}
