// Price migrations (docs/decisions/price-changes-keep-existing-subscribers.md): a plan's
// existing subscribers keep the price they pay when its amount_cents is edited; the
// operator moves them to the plan's current price with notice (`billing plans
// migrate`), applied at each one's first period end on or after the notice date. The
// rules live in SQL (billing.plan_price_migrate, billing.renewal_terms); this is the
// CLI's door, as the owner.
import type pg from 'pg';

export interface PriceMigration {
  id: string;
  plan_id: string;
  plan_key: string;
  price_cents: number;
  currency: string;
  notice_days: number;
  notice_ends_at: string;
  /** Subscriptions it concerned when made. */
  subscriptions: number;
  /** Of those, how many have not renewed into it yet. */
  pending_subscriptions: number;
  created_at: string;
}

export interface PriceMigrationMade extends PriceMigration {
  subscription_ids: string[];
  /** Subscriptions already at the plan's price whose earlier pending migration was dropped. */
  cleared_subscriptions: number;
}

/** Schedules plan (id or key) `plan`'s subscribers' move to its current price after `noticeDays`. */
export async function migratePlanPrice(pool: pg.Pool, communityId: string, plan: string, noticeDays: number): Promise<PriceMigrationMade> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    const { rows } = await client.query<{ r: PriceMigrationMade }>('select billing.plan_price_migrate($1, $2, $3) as r',
      [communityId, plan, noticeDays]);
    await client.query('commit');
    return rows[0].r;
  } catch (err) {
    await client.query('rollback').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

/** A community's price migrations, newest first (optionally of one plan, by id or key). */
export async function listPriceMigrations(pool: pg.Pool, communityId: string, plan?: string): Promise<PriceMigration[]> {
  const { rows } = await pool.query<{ r: PriceMigration }>(
    `select billing.price_migration_json(m) || jsonb_build_object('plan_key', p.key) as r
     from billing.price_migrations m
     join billing.plans p on p.community_id = m.community_id and p.id = m.plan_id
     where m.community_id = $1 and ($2::text is null or p.id = $2 or p.key = $2)
     order by m.id desc`, [communityId, plan ?? null]);
  return rows.map((r) => r.r);
}
