// The catalog as a `billing catalog apply` file (billing_api.catalog_file, shown on the
// dashboard's catalog page): a file that uses every part of the format, applied to one
// community, exported, applied to an empty one and exported again, gives the same file;
// applying the export where it came from changes nothing; no secret is in it; a viewer
// reads it; another community's catalog never appears in it.
import { inviteOperator, signInWithLink } from '../../src/domain/operators/operator-accounts';
import { applyCatalog, parseCatalog } from '../../src/domain/catalog/catalog-file';
import { dashboardOperation } from '../../src/operations';
import type { Caller } from '../../src/operations/executor';
import { createTenant, startApp, TestApp } from '../support/app';
import { createExecutor } from '../support/dashboard';
import { catalog as fixtureCatalog } from '../support/shop';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const ENCRYPTION_KEY = Buffer.alloc(32, 9).toString('base64');

/** Everything the file format has, non-default values wherever there is a choice. */
const FULL = {
  payment_provider: { type: 'stripe', secret_key: 'sk_test_roundtripSECRET0001', webhook_secret: 'whsec_roundtripSECRET0002', statement_descriptor: 'ROUNDTRIP' },
  dunning: { retry_days: [2, 4, 9], final_action: 'cancel' },
  platforms: [
    { key: 'discord-main', platform: 'discord', name: 'Main server', settings: { guild_id: '123' } },
    { key: 'tg', platform: 'telegram', settings: { chat_id: '-1001234567890' } },
  ],
  entitlements: [
    { key: 'chat', name: 'Chat', benefits: [{ platform: 'discord-main', type: 'role', value: '2001' }, { platform: 'tg', type: 'chat', value: '-100' }] },
    { key: 'stage', name: 'Stage' },
  ],
  tiers: [
    { key: 'gold', name: 'Gold', description: 'The good one', rank: 2, features: ['Chat', 'Stage'], perks: [{ title: 'Swag', detail: 'A mug' }, { title: 'Thanks' }],
      entitlements: ['chat', 'stage'],
      plans: [
        { key: 'gold-m', name: 'Gold monthly', amount_cents: 1500, currency: 'usd', interval: 'month', trial_days: 7, stripe_price_id: 'price_gold_m' },
        { key: 'gold-y', amount_cents: 15000, currency: 'usd', interval: 'year' },
        { key: 'gold-old', name: 'Retired', amount_cents: 1200, currency: 'usd', interval: 'month', active: false },
      ] },
    { key: 'legacy', name: 'Legacy', rank: 0, active: false, entitlements: ['chat'],
      plans: [{ key: 'legacy-m', amount_cents: 500, currency: 'eur', interval: 'month' }] },
    { key: 'guide', name: 'Guide', kind: 'one_time', billing_mode: 'one_time', rank: 1, entitlements: ['chat'],
      plans: [{ key: 'guide-once', name: 'Guide', amount_cents: 900, currency: 'usd', access_days: 30 }] },
  ],
  discounts: [
    { code: 'WELCOME10', name: 'Welcome', value_type: 'percent', percent_off: 12.5, duration: 'repeating', duration_months: 3,
      use_limit: 100, min_spend_cents: 500, max_spend_cents: 20000, starts_at: '2026-01-01T00:00:00.000Z', expires_at: '2030-01-01T00:00:00.000Z',
      tiers: ['gold'], members: [{ platform: 'discord', platform_uid: '42', username: 'ada' }] },
    { code: 'FIVE', value_type: 'amount', amount_off_cents: 500, currency: 'usd', duration: 'forever', is_active: false },
  ],
};

async function sessionOf(communityId: string, role: 'owner' | 'viewer'): Promise<Caller> {
  const invite = await inviteOperator(app.owner, communityId, `${role}-${Math.random().toString(36).slice(2)}@example.com`, role);
  const signed = await signInWithLink(app.api, invite.token, `10.8.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`);
  if (!signed.ok) throw new Error('link refused');
  return { key: null, session: signed.session.token, ip: '127.0.0.1' };
}

async function exportOf(communityId: string, role: 'owner' | 'viewer' = 'owner'): Promise<Json> {
  const out = await createExecutor(app).run(dashboardOperation('get_catalog_file'), await sessionOf(communityId, role), {});
  expect(out.problem).toBeFalsy();
  return (typeof out.body === 'string' ? JSON.parse(out.body) : out.body) as Json;
}

const apply = (communityId: string, file: unknown) => applyCatalog(app.owner, communityId, parseCatalog(file), { encryptionKey: ENCRYPTION_KEY });

/** The file as the export writes it: secrets out, defaults written, lists in key order. */
function normalised(file: Json): Json {
  const { secret_key: _s, webhook_secret: _w, ...provider } = file.payment_provider;
  const byKey = (a: Json, b: Json) => (a.key < b.key ? -1 : 1);
  return {
    payment_provider: provider,
    dunning: file.dunning,
    platforms: [...file.platforms].sort(byKey).map((p: Json) => p),
    entitlements: [...file.entitlements].sort(byKey).map((e: Json) => (e.benefits ? { ...e, benefits: [...e.benefits].sort((a: Json, b: Json) => (a.platform < b.platform ? -1 : 1)) } : e)),
    tiers: [...file.tiers].sort((a: Json, b: Json) => a.rank - b.rank || (a.key < b.key ? -1 : 1)).map((t: Json) => ({
      kind: 'subscription', billing_mode: 'recurring', active: true, ...t,
      entitlements: [...t.entitlements].sort(),
      plans: [...t.plans].sort(byKey).map((p: Json) => ({ trial_days: 0, active: true, ...p })),
    })),
    discounts: [...file.discounts].sort((a: Json, b: Json) => (a.code.toLowerCase() < b.code.toLowerCase() ? -1 : 1))
      .map((d: Json) => ({ duration: 'once', is_active: true, ...d })),
  };
}

test('a catalog file survives export, apply to an empty community and export again; no secret leaves', async () => {
  const a = await createTenant(app.owner);
  const b = await createTenant(app.owner);
  const other = await createTenant(app.owner);
  await apply(other.communityId, fixtureCatalog()); // another community's catalog, never in A's file
  await apply(a.communityId, FULL);

  const exported = await exportOf(a.communityId);
  expect(exported).toEqual(normalised(FULL));
  const text = JSON.stringify(exported);
  expect(text).not.toContain('SECRET');
  expect(text).not.toContain('silver'); // the other community's tier
  // What the dashboard shows is a file `billing catalog apply` takes.
  expect(() => parseCatalog(exported)).not.toThrow();

  await apply(b.communityId, exported);
  expect(await exportOf(b.communityId)).toEqual(exported);

  // Applied where it came from, it changes nothing.
  const before = (await app.owner.query(`select count(*)::int as n, max(updated_at) as at from billing.tiers where community_id = $1`, [a.communityId])).rows[0];
  await apply(a.communityId, exported);
  expect((await app.owner.query(`select count(*)::int as n, max(updated_at) as at from billing.tiers where community_id = $1`, [a.communityId])).rows[0]).toEqual(before);
  expect(await exportOf(a.communityId)).toEqual(exported);

  // A viewer reads the same file.
  expect(await exportOf(a.communityId, 'viewer')).toEqual(exported);
});

test('an empty community exports an empty file that applies', async () => {
  const empty = await createTenant(app.owner);
  const file = await exportOf(empty.communityId);
  expect(Object.keys(file).filter((k) => k !== 'dunning')).toEqual([]);
  expect(() => parseCatalog(file)).not.toThrow();
});
