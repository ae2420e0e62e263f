// Seeding for the MCP tests: rows written as the owner role (the ledger and event
// triggers then do their work), so each tool has real data to answer with.
import type pg from 'pg';

export class McpSeed {
  constructor(readonly owner: pg.Pool, readonly communityId: string) {}

  private async id(sql: string, values: unknown[]): Promise<string> {
    const { rows } = await this.owner.query<{ id: string }>(sql, values);
    return rows[0].id;
  }

  private unique(prefix: string): string {
    return `${prefix}-${Math.random().toString(36).slice(2, 10)}`;
  }

  async useSandboxPayments(): Promise<void> {
    await this.owner.query(`update billing.communities set payment_provider = 'sandbox' where id = $1`, [this.communityId]);
  }

  async platform(platform: 'discord' | 'telegram'): Promise<string> {
    const settings = platform === 'discord' ? { guild_id: '1' } : { chat_id: '-1001' };
    return this.id('insert into billing.platform_configs (community_id, key, platform, name, settings) values ($1, $2, $3, $3, $4) returning id',
      [this.communityId, this.unique(platform), platform, settings]);
  }

  async tier(name: string, opts: { rank?: number; kind?: 'subscription' | 'one_time' } = {}): Promise<string> {
    const kind = opts.kind ?? 'subscription';
    return this.id(
      `insert into billing.tiers (community_id, key, name, description, rank, kind, billing_mode, features, perks)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9) returning id`,
      [this.communityId, this.unique('tier'), name, `${name} tier`, opts.rank ?? 0, kind, kind === 'one_time' ? 'one_time' : 'recurring',
        ['Chat access'], JSON.stringify([{ title: 'Support', detail: 'Within a day' }])]);
  }

  async plan(tierId: string, amount: number, interval: 'month' | 'year' | null = 'month'): Promise<string> {
    return this.id(
      `insert into billing.plans (community_id, tier_id, key, name, amount_cents, currency, interval)
       values ($1, $2, $3, $4, $5, 'usd', $6) returning id`,
      [this.communityId, tierId, this.unique('plan'), interval ? `${interval}ly` : 'once', amount, interval]);
  }

  async entitlement(key: string, tierIds: string[]): Promise<string> {
    const id = await this.id('insert into billing.entitlements (community_id, key, name) values ($1, $2, $2) returning id', [this.communityId, key]);
    for (const tierId of tierIds) {
      await this.owner.query('insert into billing.tier_entitlements (community_id, tier_id, entitlement_id) values ($1, $2, $3)',
        [this.communityId, tierId, id]);
    }
    return id;
  }

  async member(opts: { discord?: string; telegram?: string; subject?: [string, string] } = {}): Promise<string> {
    const id = await this.id('insert into billing.members (community_id) values ($1) returning id', [this.communityId]);
    for (const platform of ['discord', 'telegram'] as const) {
      const uid = opts[platform];
      if (uid) {
        await this.owner.query(
          'insert into billing.member_identities (community_id, member_id, platform, platform_uid, username) values ($1, $2, $3, $4, $5)',
          [this.communityId, id, platform, uid, `user-${uid}`]);
      }
    }
    if (opts.subject) {
      await this.owner.query('insert into billing.external_subjects (community_id, member_id, namespace, external_user_id) values ($1, $2, $3, $4)',
        [this.communityId, id, ...opts.subject]);
    }
    return id;
  }

  async subscription(memberId: string, planId: string, status = 'active'): Promise<string> {
    return this.id(
      `insert into billing.subscriptions (community_id, member_id, plan_id, status, current_period_start, current_period_end, cancel_at)
       values ($1, $2, $3, $4, now(), now() + interval '30 days', case when $4 = 'cancelling' then now() + interval '30 days' end)
       returning id`,
      [this.communityId, memberId, planId, status]);
  }

  async purchase(memberId: string, planId: string, amount: number): Promise<string> {
    return this.id(
      `insert into billing.purchases (community_id, member_id, plan_id, amount_cents, currency) values ($1, $2, $3, $4, 'usd') returning id`,
      [this.communityId, memberId, planId, amount]);
  }
}
