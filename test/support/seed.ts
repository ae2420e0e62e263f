// Seeding for the read API tests: rows written directly as the owner role, in one
// community, so each test reads back exactly what it put there.
import type pg from 'pg';

export class Seed {
  constructor(readonly owner: pg.Pool, readonly communityId: string) {}

  private async one<T = Record<string, unknown>>(sql: string, values: unknown[]): Promise<T> {
    const { rows } = await this.owner.query(sql, values);
    return rows[0] as T;
  }

  async tier(opts: { key?: string; name?: string; billingMode?: 'recurring' | 'one_time' } = {}): Promise<string> {
    const key = opts.key ?? `tier-${Math.random().toString(36).slice(2, 10)}`;
    const r = await this.one<{ id: string }>(
      'insert into billing.tiers (community_id, key, name, billing_mode) values ($1, $2, $3, $4) returning id',
      [this.communityId, key, opts.name ?? key, opts.billingMode ?? 'recurring']);
    return r.id;
  }

  async plan(tierId: string, opts: { amount?: number; currency?: string; interval?: 'month' | 'year' | null; name?: string | null } = {}): Promise<string> {
    const r = await this.one<{ id: string }>(
      `insert into billing.plans (community_id, tier_id, key, name, amount_cents, currency, interval)
       values ($1, $2, $3, $4, $5, $6, $7) returning id`,
      [this.communityId, tierId, `plan-${Math.random().toString(36).slice(2, 10)}`, opts.name === undefined ? 'Monthly' : opts.name,
        opts.amount ?? 1000, opts.currency ?? 'usd', opts.interval === undefined ? 'month' : opts.interval]);
    return r.id;
  }

  async member(opts: { discord?: string; telegram?: string; username?: string | null; subject?: [string, string] } = {}): Promise<string> {
    const r = await this.one<{ id: string }>('insert into billing.members (community_id) values ($1) returning id', [this.communityId]);
    for (const platform of ['discord', 'telegram'] as const) {
      const uid = opts[platform];
      if (uid) {
        await this.owner.query(
          'insert into billing.member_identities (community_id, member_id, platform, platform_uid, username) values ($1, $2, $3, $4, $5)',
          [this.communityId, r.id, platform, uid, opts.username === undefined ? `user-${uid}` : opts.username]);
      }
    }
    if (opts.subject) {
      await this.owner.query(
        'insert into billing.external_subjects (community_id, member_id, namespace, external_user_id) values ($1, $2, $3, $4)',
        [this.communityId, r.id, opts.subject[0], opts.subject[1]]);
    }
    return r.id;
  }

  async subscription(memberId: string, planId: string, opts: { status?: string; createdAt?: string; cancelledAt?: string | null; periodEnd?: string | null } = {}): Promise<string> {
    const r = await this.one<{ id: string }>(
      `insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_end, created_at, cancelled_at)
       values ($1, $2, $3, $4, $5, coalesce($6::timestamptz, now()), $7) returning id`,
      [this.communityId, memberId, planId, opts.status ?? 'active', opts.periodEnd === undefined ? new Date(Date.now() + 30 * 864e5).toISOString() : opts.periodEnd,
        opts.createdAt ?? null, opts.cancelledAt ?? null]);
    return r.id;
  }

  async purchase(memberId: string, planId: string, opts: { amount?: number; accessExpiresAt?: string | null } = {}): Promise<string> {
    const r = await this.one<{ id: string }>(
      `insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency, access_expires_at)
       values ($1, $2, $3, $4, 'usd', $5) returning id`,
      [this.communityId, memberId, planId, opts.amount ?? 5000, opts.accessExpiresAt ?? null]);
    return r.id;
  }

  async entitlement(key: string, name = key): Promise<string> {
    const r = await this.one<{ id: string }>(
      'insert into billing.entitlements (community_id, key, name) values ($1, $2, $3) returning id', [this.communityId, key, name]);
    return r.id;
  }

  /** A ledger row as the ledger triggers would hold it. */
  async memberEntitlement(memberId: string, entitlementId: string, opts: { status?: 'active' | 'inactive'; sources?: unknown[]; benefits?: unknown[]; revision?: number } = {}): Promise<string> {
    const status = opts.status ?? 'active';
    const r = await this.one<{ id: string }>(
      `insert into billing.member_entitlements (community_id, member_id, entitlement_id, status, revision, sources, benefits, granted_at, revoked_at)
       values ($1, $2, $3, $4, $5, $6, $7, now(), case when $4 = 'inactive' then now() end)
       on conflict (community_id, member_id, entitlement_id) do update set status = excluded.status,
         revision = excluded.revision, sources = excluded.sources, benefits = excluded.benefits,
         granted_at = excluded.granted_at, revoked_at = excluded.revoked_at
       returning id`,
      [this.communityId, memberId, entitlementId, status, opts.revision ?? 1, JSON.stringify(opts.sources ?? []), JSON.stringify(opts.benefits ?? [])]);
    return r.id;
  }
}

export function subscriptionSource(subId: string, tierId: string, planId: string, clientReferenceId: string | null = null) {
  return { type: 'subscription', id: subId, status: 'active', tier_id: tierId, plan_id: planId, client_reference_id: clientReferenceId, valid_until: '2030-01-01T00:00:00.000Z' };
}
