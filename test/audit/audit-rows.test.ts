// What an audit line holds (issue 31 item 3): the row before and after, the changed
// columns, one line per row of a statement however many it changes, and never a
// credential (hashes, ciphertexts) nor a member's personal data.
import pg from 'pg';
import { AUDITED_TABLES } from '../../src/core/statuses';
import { createOwnerPool } from '../../src/db/pool';
import { createCommunity } from '../../src/domain/communities/community-admin';
import { TEST_DB } from '../support/app';

let owner: pg.Pool;
let c: string;

beforeAll(async () => {
  owner = createOwnerPool(TEST_DB());
  ({ id: c } = await createCommunity(owner, 'Audit rows'));
});
afterAll(() => owner.end());

const q = async (sql: string, values: unknown[] = []) => (await owner.query(sql, values)).rows;
const lines = (table: string) => q(`select row_id, operation, changed, before, after from billing.audit_log
  where community_id = $1 and table_name = $2 order by id`, [c, table]);

/** The audited tables with each trigger's arguments, read from pg_trigger. */
async function auditTriggers(): Promise<{ table: string; name: string; args: string[]; when: boolean }[]> {
  const rows = await q(`select c.relname as table, t.tgname as name, t.tgqual is not null as when,
      encode(t.tgargs, 'escape') as args
    from pg_trigger t join pg_class c on c.oid = t.tgrelid
    where t.tgname like '\\_950\\_audit\\_%' and not t.tgisinternal order by 1, 2`);
  return rows.map((r) => ({ table: r.table, name: r.name, when: r.when, args: (r.args as string).split('\\000').filter((_, i, a) => i < a.length - 1) }));
}

test('insert, update and delete: before and after are the row, changed the columns that changed', async () => {
  const [tier] = await q(`insert into billing.tiers (community_id, key, name, rank) values ($1, 'gold', 'Gold', 1) returning id`, [c]);
  await q(`update billing.tiers set name = 'Golden', rank = 2 where community_id = $1 and id = $2`, [c, tier.id]);
  await q(`delete from billing.tiers where community_id = $1 and id = $2`, [c, tier.id]);
  const [ins, upd, del] = await lines('tiers');
  expect(ins).toMatchObject({ row_id: tier.id, operation: 'insert', changed: [], before: null,
    after: expect.objectContaining({ id: tier.id, community_id: c, key: 'gold', name: 'Gold', rank: 1, active: true }) });
  expect(upd).toMatchObject({ row_id: tier.id, operation: 'update', changed: ['name', 'rank'],
    before: expect.objectContaining({ name: 'Gold', rank: 1 }), after: expect.objectContaining({ name: 'Golden', rank: 2 }) });
  expect(del).toMatchObject({ row_id: tier.id, operation: 'delete', changed: [], before: expect.objectContaining({ name: 'Golden' }), after: null });
  // The whole row, every column, as to_jsonb writes it.
  expect(Object.keys(ins.after).sort()).toEqual(Object.keys(del.before).sort());
  expect(Object.keys(ins.after)).toEqual(expect.arrayContaining(['created_at', 'description', 'features', 'kind', 'perks', 'updated_at']));
});

test('a statement of many rows writes one line per row, each paired with its own before', async () => {
  await q(`insert into billing.entitlements (community_id, key, name) select $1, 'e' || g, 'E' || g from generate_series(1, 50) g`, [c]);
  await q(`update billing.entitlements set name = name || '!' where community_id = $1`, [c]);
  const found = await lines('entitlements');
  expect(found.filter((l) => l.operation === 'insert')).toHaveLength(50);
  const updates = found.filter((l) => l.operation === 'update');
  expect(updates).toHaveLength(50);
  for (const u of updates) expect([u.before.name + '!', u.row_id]).toEqual([u.after.name, u.after.id]);
});

test('a change of a key column is an update of that row (old and new paired by position), an empty change writes nothing', async () => {
  const [pc] = await q(`insert into billing.platform_configs (community_id, key, platform, settings) values ($1, 'main', 'discord', '{"guild_id": "1"}') returning id`, [c]);
  const [ent] = await q(`insert into billing.entitlements (community_id, key, name) values ($1, 'vip', 'VIP') returning id`, [c]);
  await q(`insert into billing.entitlement_benefits (community_id, entitlement_id, platform_config_id, type, value) values ($1, $2, $3, 'role', 'r1'), ($1, $2, $3, 'role', 'r2')`, [c, ent.id, pc.id]);
  await q(`update billing.entitlement_benefits set value = value || 'x' where community_id = $1`, [c]);
  await q(`update billing.entitlement_benefits set value = value where community_id = $1`, [c]);
  const updates = (await lines('entitlement_benefits')).filter((l) => l.operation === 'update');
  expect(updates.map((u) => [u.before.value, u.after.value, u.changed, u.row_id]).sort()).toEqual([
    ['r1', 'r1x', ['value'], `${ent.id}/${pc.id}/role/r1x`],
    ['r2', 'r2x', ['value'], `${ent.id}/${pc.id}/role/r2x`],
  ]);
});

test('bookkeeping alone (a key\'s last use, a streak of failures, updated_at) writes no line', async () => {
  const [key] = await q(`insert into billing_private.api_keys (community_id, prefix, key_hash, scopes) values ($1, 'bk_q', $2, '{plans:read}') returning id`, [c, `hash-quiet-${c}`]);
  await q(`update billing_private.api_keys set last_used_at = now() where id = $1`, [key.id]);
  const [we] = await q(`insert into billing.webhook_endpoints (community_id, url) values ($1, 'https://example.com/q') returning id`, [c]);
  await q(`update billing.webhook_endpoints set failing_since = now(), updated_at = now() where id = $1`, [we.id]);
  await q(`update billing.webhook_endpoints set enabled = false, disabled_reason = 'failing' where id = $1`, [we.id]);
  expect((await lines('api_keys')).map((l) => l.operation)).toEqual(['insert']);
  const endpoint = await lines('webhook_endpoints');
  expect(endpoint.map((l) => [l.operation, l.changed])).toEqual([['insert', []], ['update', ['disabled_reason', 'enabled']]]);
});

test('credentials and personal data never enter the log: hidden columns are named in changed, never valued', async () => {
  const secret = `SECRET-${c}`;
  const tag = `t-${c.slice(-12).toLowerCase()}`; // a tag is at most 40 characters
  const [key] = await q(`insert into billing_private.api_keys (community_id, prefix, key_hash, scopes) values ($1, 'bk_s', $2, '{plans:read}') returning id`, [c, `${secret}-hash`]);
  await q(`insert into billing_private.payment_secrets (community_id, provider, name, ciphertext) values ($1, 'stripe', 'secret_key', $2)`, [c, `v1:${secret}-pay`]);
  await q(`update billing_private.payment_secrets set ciphertext = $2 where community_id = $1`, [c, `v1:${secret}-pay2`]);
  const [pc] = await q(`select id from billing.platform_configs where community_id = $1`, [c]);
  await q(`insert into billing_private.platform_secrets (community_id, platform_config_id, name, ciphertext) values ($1, $2, 'bot_token', $3)`, [c, pc.id, `v1:${secret}-bot`]);
  const [we] = await q(`insert into billing.webhook_endpoints (community_id, url) values ($1, 'https://example.com/s') returning id`, [c]);
  await q(`insert into billing_private.webhook_secrets (community_id, endpoint_id, secret_ciphertext) values ($1, $2, $3)`, [c, we.id, `${secret}-whsec`]);
  await q(`update billing_private.webhook_secrets set previous_ciphertext = secret_ciphertext, secret_ciphertext = $3, previous_expires_at = now() where community_id = $1 and endpoint_id = $2`, [c, we.id, `${secret}-whsec2`]);
  const [user] = await q(`insert into billing_private.operator_users (community_id, email, role) values ($1, 'op@example.com', 'admin') returning id`, [c]);
  await q(`update billing_private.operator_users set password_hash = $2 where id = $1`, [user.id, `scrypt$${secret}-pw`]);
  // an operator's second factor and recovery codes (the secret encrypted, the codes hashed)
  await q(`insert into billing_private.operator_second_factors (community_id, user_id, secret_ciphertext) values ($1, $2, $3)`, [c, user.id, `v1:${secret}-totp`]);
  await q(`update billing_private.operator_second_factors set confirmed_at = now(), last_step = 1 where community_id = $1 and user_id = $2`, [c, user.id]);
  await q(`insert into billing_private.operator_recovery_codes (community_id, user_id, code_sha256) values ($1, $2, $3)`, [c, user.id, `${secret}-rc`]);
  await q(`insert into billing.discount_codes (community_id, code, value_type, percent_off, members) values ($1, 'VIPONLY', 'percent', 10, $2)`,
    [c, JSON.stringify([{ platform: 'discord', platform_uid: `${secret}-uid`, username: `${secret}-name` }])]);
  // A member's email, changed by an actor (the CLI's setting stands in for any door).
  const client = await owner.connect();
  try {
    await client.query('begin');
    await client.query(`select set_config('app.actor', 'test', true)`);
    const { rows: [m] } = await client.query(`insert into billing.members (community_id, email) values ($1, $2) returning id`, [c, `${secret.toLowerCase()}@example.com`]);
    await client.query(`update billing.members set email = $3 where community_id = $1 and id = $2`, [c, m.id, `new-${secret.toLowerCase()}@example.com`]);
    // what operators write about a member, and the billing details a checkout gave
    await client.query(`update billing.members set note = $3, tags = $4, billing_name = $5, billing_tax_id = $6 where community_id = $1 and id = $2`,
      [c, m.id, `${secret} owes us`, [tag], `${secret} Ltd`, `${secret}-vat`]);
    await client.query('commit');
  } finally {
    client.release();
  }
  const log = await q(`select * from billing.audit_log where community_id = $1`, [c]);
  expect(JSON.stringify(log).toLowerCase()).not.toContain(secret.toLowerCase());
  expect(JSON.stringify(log)).not.toContain(tag);
  const changedOf = (table: string) => log.filter((l) => l.table_name === table && l.operation === 'update').map((l) => l.changed);
  expect(changedOf('payment_secrets')).toEqual([['ciphertext']]);
  expect(changedOf('operator_users')).toEqual([['password_hash']]);
  expect(changedOf('operator_second_factors')).toEqual([['confirmed_at', 'last_step']]);
  expect(log.filter((l) => l.table_name === 'operator_recovery_codes').map((l) => l.operation)).toEqual(['insert']);
  expect(changedOf('webhook_secrets')).toEqual([['previous_ciphertext', 'previous_expires_at', 'secret_ciphertext']]);
  // the email, and the display name and search text it is in; then the note, tags and billing details
  expect(changedOf('members')).toEqual([['display_name', 'email', 'search_text'], ['billing_name', 'billing_tax_id', 'note', 'tags']]);
  expect(log.find((l) => l.table_name === 'api_keys' && l.row_id === key.id)?.after).toEqual(expect.objectContaining({ prefix: 'bk_s', scopes: ['plans:read'] }));
});

test('every audited table has its three triggers, lifecycle ones only with an actor, and hides every credential-named column', async () => {
  const triggers = await auditTriggers();
  expect([...new Set(triggers.map((t) => t.table))].sort()).toEqual([...AUDITED_TABLES].sort());
  const LIFECYCLE = ['grants', 'invoices', 'members', 'refunds', 'subscriptions'];
  for (const table of AUDITED_TABLES) {
    const own = triggers.filter((t) => t.table === table);
    expect([table, own.map((t) => t.name)]).toEqual([table, ['_950_audit_delete', '_950_audit_insert', '_950_audit_update']]);
    expect([table, own.map((t) => t.when)]).toEqual([table, Array(3).fill(LIFECYCLE.includes(table))]);
    expect([table, new Set(own.map((t) => JSON.stringify(t.args))).size]).toEqual([table, 1]);
  }
  // A column whose name says credential must be hidden (a new one fails here until it is).
  const cols = await q(`select c.relname as table, a.attname as col from pg_attribute a join pg_class c on c.oid = a.attrelid
    where c.relname = any ($1) and c.relnamespace in ('billing'::regnamespace, 'billing_private'::regnamespace)
      and a.attnum > 0 and not a.attisdropped and a.attname ~ '(hash|cipher|secret|token|password)'`, [[...AUDITED_TABLES]]);
  expect(cols.length).toBeGreaterThanOrEqual(6);
  for (const { table, col } of cols) {
    const hidden = (triggers.find((t) => t.table === table)!.args[1] ?? '').split(',');
    expect([table, col, hidden.includes(col)]).toEqual([table, col, true]);
  }
  // And a member's personal data (an erased member's must not outlive it here): the
  // member's and the buyer's on an invoice, never the seller's.
  const personal = await q(`select c.relname as table, a.attname as col from pg_attribute a join pg_class c on c.oid = a.attrelid
    where c.relname in ('members', 'invoices') and c.relnamespace = 'billing'::regnamespace
      and a.attnum > 0 and not a.attisdropped
      and a.attname ~ '^(email|display_name|search_text|note|tags|billing_(name|address_lines|country|tax_id)|buyer_(name|address_lines|tax_id))$'`);
  expect(personal.length).toBeGreaterThanOrEqual(12);
  for (const { table, col } of personal) {
    const hidden = (triggers.find((t) => t.table === table)!.args[1] ?? '').split(',');
    expect([table, col, hidden.includes(col)]).toEqual([table, col, true]);
  }
});
