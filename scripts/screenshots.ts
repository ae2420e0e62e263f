// `npm run screenshots`: a PNG of each dashboard page, the member portal and the
// sandbox checkout page, in docs/screenshots/ (mail.png: the Mail page after a sandbox
// checkout with an email, its messages kept as `npm start` keeps them without SMTP_URL). Builds a scratch database on
// DATABASE_SERVER_URL (default postgres://postgres@127.0.0.1:5432, as npm run
// db:schema), seeds a demo community with the demo catalog and a month of sandbox
// activity, serves the app on an ephemeral port and drives Chromium
// (@sparticuz/chromium + playwright-core) through the pages. The database is dropped
// at the end.
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import chromium from '@sparticuz/chromium';
import pg from 'pg';
import { chromium as playwright } from 'playwright-core';
import { createApp, createHttpServer } from '../src/app';
import { loadConfig } from '../src/core/config';
import { SCOPES } from '../src/core/scopes';
import { ensureLogin } from '../src/db/logins';
import { applyMigrations, withDatabase } from '../src/db/migrate';
import { createApiPool, createOwnerPool } from '../src/db/pool';
import type { JobHelpers } from 'graphile-worker';
import { applyCatalog, readCatalogFile } from '../src/domain/catalog/catalog-file';
import { sandboxAdvance, sandboxComplete } from '../src/domain/checkout/checkout-completion';
import { createCommunity, createKey } from '../src/domain/communities/community-admin';
import { inviteOperator, signInLink } from '../src/domain/operators/operator-accounts';
import { makeMailTask } from '../worker/tasks/mail_messages__send';

const ROOT = path.resolve(__dirname, '..');
const OUT = path.join(ROOT, 'docs/screenshots');

async function main(): Promise<void> {
  const server = process.env.DATABASE_SERVER_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const scratch = `billing_screenshots_${process.pid}`;
  const admin = new pg.Client({ connectionString: withDatabase(server, 'postgres') });
  await admin.connect();
  await admin.query(`create database ${scratch}`);
  const url = withDatabase(server, scratch);
  let close = async () => {};
  try {
    await applyMigrations(url, { includeCurrent: true });
    const owner = createOwnerPool(url);
    const api = createApiPool(await ensureLogin(url, 'billing_app'), 5);
    const config = { ...loadConfig({ NODE_ENV: 'development' }), webhookEncryptionKey: crypto.randomBytes(32).toString('base64'), webhookAllowPrivateUrls: true };
    const { app, graphql } = createApp({ config, apiPool: api, ownerPool: owner });
    const http = createHttpServer(app);
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
    close = async () => { http.closeAllConnections(); http.close(); await graphql.release(); await api.end(); await owner.end(); };

    // A community with a month of sales: signups every few days, a cancel, a past_due.
    const community = await createCommunity(owner, 'Makers Guild');
    const ids = await applyCatalog(owner, community.id, readCatalogFile(path.join(ROOT, 'db/demo/demo-catalog.json')));
    const key = await createKey(owner, community.id, [...SCOPES], 'screenshots');
    const post = async (p: string, body: unknown) => {
      const res = await fetch(base + p, { method: 'POST', headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const json = await res.json() as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
      if (!res.ok) throw new Error(`${p}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    };
    let n = 0;
    const buy = async (tier: string, plan: string) => {
      const link = await post('/v1/checkout-links', { tier_id: ids.tiers[tier], plan_id: ids.plans[plan], subject: { external: { namespace: 'site', external_user_id: `user-${++n}` } } });
      await sandboxComplete(owner, link.checkout_id);
      return link.member_id as string;
    };
    let firstMember = '';
    for (let week = 0; week < 10; week++) {
      const m = await buy('gold', 'gold-monthly');
      firstMember ||= m;
      await buy('silver', 'silver-monthly');
      if (week % 3 === 0) await buy('silver', 'silver-annual');
      await sandboxAdvance(owner, community.id, 3);
    }
    await post(`/v1/subscriptions/${(await (await fetch(`${base}/v1/subscriptions?limit=1`, { headers: { authorization: `Bearer ${key.key}` } })).json() as { data: { id: string }[] }).data[0].id}/cancel`, {});
    await post('/v1/webhooks/endpoints', { url: 'https://hooks.example.com/billing', description: 'Community bot' });
    const checkout = await post('/v1/checkout-links', { tier_id: ids.tiers.gold, plan_id: ids.plans['gold-monthly'], subject: { external: { namespace: 'site', external_user_id: 'new-buyer' } } });
    const portal = await post(`/v1/members/${firstMember}/portal-sessions`, {});
    // A checkout with an email: its receipt and access email, kept by the worker's mail
    // task (no SMTP_URL), as the README's walkthrough shows them.
    const withEmail = await post('/v1/checkout-links', { tier_id: ids.tiers.gold, plan_id: ids.plans['gold-monthly'],
      subject: { external: { namespace: 'site', external_user_id: 'ann' } }, customer_email: 'ann@example.com' });
    await sandboxComplete(owner, withEmail.checkout_id);
    const queued = await owner.query<{ id: string }>(`select id from billing.mail_messages where community_id = $1 and status = 'queued' order by id`, [community.id]);
    const mail = makeMailTask({ smtpUrl: null, from: config.mailFrom, baseUrl: base, key: config.webhookEncryptionKey });
    await mail.task({ community_id: community.id, ids: queued.rows.map((r) => r.id) },
      { withPgClient: (fn: (c: pg.PoolClient) => Promise<unknown>) => owner.connect().then((c) => fn(c).finally(() => c.release())) } as unknown as JobHelpers);
    const invitation = await inviteOperator(owner, community.id, 'owner@example.com', 'owner');

    fs.mkdirSync(OUT, { recursive: true });
    const browser = await playwright.launch({ executablePath: await chromium.executablePath(),
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'] });
    try {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      const shot = async (name: string, target?: string, fullPage = false) => {
        if (target) await page.goto(target);
        await page.screenshot({ path: path.join(OUT, `${name}.png`), fullPage });
        process.stdout.write(`wrote docs/screenshots/${name}.png\n`);
      };
      await shot('checkout', checkout.url, true);
      await shot('portal', portal.url, true);
      await page.goto(signInLink(base, invitation.token));
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL('**/dashboard/account');
      await shot('overview', `${base}/dashboard`, true);
      await shot('reports', `${base}/dashboard/reports`, true);
      await shot('subscriptions', `${base}/dashboard/subscriptions`);
      await shot('invoices', `${base}/dashboard/invoices`);
      await shot('members', `${base}/dashboard/members`);
      await shot('member', `${base}/dashboard/members/${firstMember}`, true);
      await shot('catalog', `${base}/dashboard/catalog`);
      await shot('keys', `${base}/dashboard/keys`);
      await shot('webhooks', `${base}/dashboard/webhooks`);
      await shot('events', `${base}/dashboard/events`);
      await shot('operators', `${base}/dashboard/operators`);
      await shot('mail', `${base}/dashboard/mail`, true);
      await page.goto(`${base}/dashboard/audit?table=subscriptions`);
      await page.locator('main details summary').first().click();
      await shot('audit');
      await page.context().clearCookies();
      await shot('sign-in', `${base}/dashboard/sign-in`);
    } finally {
      await browser.close();
    }
  } finally {
    await close();
    await admin.query(`drop database if exists ${scratch} with (force)`);
    await admin.end();
  }
}

main().catch((err) => {
  process.stderr.write(`screenshots: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
