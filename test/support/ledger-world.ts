// A small catalog for ledger tests, written directly in SQL as the owner, and an
// independent oracle of the grant rules (TypeScript, from the raw source rows).
import type pg from 'pg';
import { createCommunity } from '../../src/domain/communities/community-admin';

export interface World {
  communityId: string;
  tiers: string[]; // tier ids, index = tier number
  plans: string[]; // one plan per tier
  entitlements: string[];
  platformConfig: string;
  members: string[];
}

/** Tiers t0..t(n-1) with one monthly plan each; entitlements e0..; links as given. */
export async function seedWorld(db: pg.Pool | pg.PoolClient, opts: {
  tiers?: number; entitlements?: number; members?: number; links?: [number, number][]; communityId?: string;
} = {}): Promise<World> {
  const nTiers = opts.tiers ?? 3;
  const nEnts = opts.entitlements ?? 3;
  const nMembers = opts.members ?? 3;
  const links = opts.links ?? [[0, 0], [1, 0], [1, 1], [2, 2]];
  const communityId = opts.communityId ?? (await createCommunity(db as pg.Pool, 'ledger world')).id;
  const { rows: [pc] } = await db.query<{ id: string }>(
    `insert into billing.platform_configs (community_id, key, platform, settings) values ($1, 'main', 'discord', '{"guild_id": "1"}') returning id`,
    [communityId]);
  const tiers: string[] = [];
  const plans: string[] = [];
  for (let i = 0; i < nTiers; i++) {
    const { rows: [t] } = await db.query<{ id: string }>(
      `insert into billing.tiers (community_id, key, name, rank) values ($1, $2, $3, $4) returning id`,
      [communityId, `t${i}`, `Tier ${i}`, i]);
    const { rows: [p] } = await db.query<{ id: string }>(
      `insert into billing.plans (community_id, tier_id, key, name, amount_cents, currency, interval)
       values ($1, $2, $3, $4, $5, 'usd', 'month') returning id`,
      [communityId, t.id, `p${i}`, `Plan ${i}`, 500 * (i + 1)]);
    tiers.push(t.id);
    plans.push(p.id);
  }
  const entitlements: string[] = [];
  for (let i = 0; i < nEnts; i++) {
    const { rows: [e] } = await db.query<{ id: string }>(
      `insert into billing.entitlements (community_id, key, name) values ($1, $2, $3) returning id`,
      [communityId, `e${i}`, `Entitlement ${i}`]);
    entitlements.push(e.id);
    await db.query(
      `insert into billing.entitlement_benefits (community_id, entitlement_id, platform_config_id, type, value)
       values ($1, $2, $3, 'role', $4)`, [communityId, e.id, pc.id, `role-${i}`]);
  }
  for (const [t, e] of links) {
    await db.query(`insert into billing.tier_entitlements (community_id, tier_id, entitlement_id) values ($1, $2, $3)`,
      [communityId, tiers[t], entitlements[e]]);
  }
  const members: string[] = [];
  for (let i = 0; i < nMembers; i++) {
    const { rows: [m] } = await db.query<{ id: string }>(
      `insert into billing.members (community_id) values ($1) returning id`, [communityId]);
    members.push(m.id);
  }
  return { communityId, tiers, plans, entitlements, platformConfig: pc.id, members };
}

export interface LedgerRow {
  member_id: string;
  entitlement_id: string;
  status: 'active' | 'inactive';
  revision: number;
  sources: { type: string; id: string; status: string; valid_until: string | null }[];
  benefits: unknown[];
  identities: unknown;
}

export async function ledgerRows(db: pg.Pool | pg.PoolClient, communityId: string): Promise<Map<string, LedgerRow>> {
  const { rows } = await db.query<LedgerRow>(
    `select member_id, entitlement_id, status, revision::int as revision, sources, benefits, identities
     from billing.member_entitlements where community_id = $1`, [communityId]);
  return new Map(rows.map((r) => [`${r.member_id}/${r.entitlement_id}`, r]));
}

/**
 * The grant rules, written independently of the SQL: for each (member, entitlement),
 * the ids of the sources that support it now. Subscriptions grant when active or
 * trialing, past_due while one of their open invoices still has a retry scheduled, or
 * cancelling before their period end unless an open invoice of theirs has no retry left, or paused until the end of the
 * period they had paid when paused (paid_through, issue 26); completed purchases grant until
 * access_expires_at (or forever).
 */
export async function expectedSupport(db: pg.Pool | pg.PoolClient, communityId: string): Promise<Map<string, string[]>> {
  const { rows: [{ now }] } = await db.query<{ now: Date }>('select billing.community_now($1) as now', [communityId]);
  const { rows: subs } = await db.query<{ id: string; member_id: string; status: string; current_period_end: Date | null; paid_through: Date | null; tier_id: string }>(
    `select s.id, s.member_id, s.status, s.current_period_end, s.paid_through, p.tier_id
     from billing.subscriptions s join billing.plans p on p.community_id = s.community_id and p.id = s.plan_id
     where s.community_id = $1`, [communityId]);
  const { rows: purs } = await db.query<{ id: string; member_id: string; status: string; access_expires_at: Date | null; tier_id: string }>(
    `select u.id, u.member_id, u.status, u.access_expires_at, p.tier_id
     from billing.purchases u join billing.plans p on p.community_id = u.community_id and p.id = u.plan_id
     where u.community_id = $1`, [communityId]);
  const { rows: links } = await db.query<{ tier_id: string; entitlement_id: string }>(
    'select tier_id, entitlement_id from billing.tier_entitlements where community_id = $1', [communityId]);
  const { rows: retrying } = await db.query<{ subscription_id: string }>(
    `select distinct subscription_id from billing.invoices
     where community_id = $1 and status = 'open' and next_attempt_at is not null and subscription_id is not null`, [communityId]);
  const retryOpen = new Set(retrying.map((r) => r.subscription_id));
  const { rows: givenUp } = await db.query<{ subscription_id: string }>(
    `select distinct subscription_id from billing.invoices
     where community_id = $1 and status = 'open' and next_attempt_at is null and subscription_id is not null`, [communityId]);
  const unpaid = new Set(givenUp.map((r) => r.subscription_id));
  const grants: { id: string; member_id: string; tier_id: string }[] = [];
  for (const s of subs) {
    const ok = ['active', 'trialing'].includes(s.status)
      || (s.status === 'past_due' && retryOpen.has(s.id))
      || (s.status === 'cancelling' && (s.current_period_end === null || s.current_period_end > now) && !unpaid.has(s.id))
      || (s.status === 'paused' && s.paid_through !== null && s.paid_through > now);
    if (ok) grants.push(s);
  }
  for (const p of purs) {
    if (p.status === 'completed' && (p.access_expires_at === null || p.access_expires_at > now)) grants.push(p);
  }
  // Grants (comps): not revoked, until expires_at.
  const { rows: comps } = await db.query<{ id: string; member_id: string; tier_id: string; expires_at: Date | null }>(
    'select id, member_id, tier_id, expires_at from billing.grants where community_id = $1 and revoked_at is null', [communityId]);
  for (const g of comps) {
    if (g.expires_at === null || g.expires_at > now) grants.push(g);
  }
  const out = new Map<string, string[]>();
  for (const g of grants) {
    for (const l of links.filter((x) => x.tier_id === g.tier_id)) {
      const key = `${g.member_id}/${l.entitlement_id}`;
      out.set(key, [...(out.get(key) ?? []), g.id].sort());
    }
  }
  return out;
}

export interface EventRow { id: string; type: string; data: any } // eslint-disable-line @typescript-eslint/no-explicit-any

export async function eventsSince(db: pg.Pool | pg.PoolClient, communityId: string, afterId: string): Promise<EventRow[]> {
  const { rows } = await db.query<EventRow>(
    `select id, type, data from billing.events where community_id = $1 and id > $2 order by id`, [communityId, afterId]);
  return rows;
}

export const ENTITLEMENT_EVENT = /^member\.entitlement\./;
