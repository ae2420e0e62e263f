// Issue 26 item 12: GraphQL that tells the truth. A missing scope is an error naming
// it; columns the tables declare not null are non-null; statuses are enums of the
// values the tables allow; no argument is advertised that is then refused (offset);
// relations have readable names. Nullability and enum values are checked against the
// database's own catalog, so a column or status added later cannot drift unnoticed.
import { createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed } from '../support/seed';

let app: TestApp;
let a: Tenant;
const ids: Record<string, string> = {};

interface GqlReply { status: number; body: any } // eslint-disable-line @typescript-eslint/no-explicit-any
interface TypeRef { kind: string; name: string | null; ofType: TypeRef | null }
interface Field { name: string; type: TypeRef; isDeprecated: boolean; deprecationReason: string | null; args: { name: string }[] }

async function gql(key: string, query: string, variables?: Record<string, unknown>): Promise<GqlReply> {
  const res = await fetch(`${app.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, body: await res.json() };
}

const TYPE = `query($name: String!) { __type(name: $name) { name kind enumValues { name }
  fields(includeDeprecated: true) { name isDeprecated deprecationReason args { name } type { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } }`;

async function typeOf(name: string): Promise<{ name: string; kind: string; enumValues: { name: string }[] | null; fields: Field[] | null }> {
  const r = await gql(a.key, TYPE, { name });
  expect(r.body.errors).toBeUndefined();
  return r.body.data.__type;
}

const named = (t: TypeRef): TypeRef => (t.ofType ? named(t.ofType) : t);
const camel = (s: string) => s.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/** The node type of a root connection field: `subscriptions` → Subscription. */
async function nodeTypeOf(rootField: string): Promise<string> {
  const query = await typeOf('Query');
  const field = query.fields!.find((f) => f.name === rootField);
  expect(field).toBeDefined();
  const connection = await typeOf(named(field!.type).name!);
  return named(connection.fields!.find((f) => f.name === 'nodes')!.type).name!;
}

beforeAll(async () => {
  app = await startApp();
  a = await createTenant(app.owner);
  const seed = new Seed(app.owner, a.communityId);
  ids.tier = await seed.tier({ name: 'Gold' });
  ids.plan = await seed.plan(ids.tier, { amount: 1500 });
  ids.member = await seed.member();
  ids.sub = await seed.subscription(ids.member, ids.plan, { status: 'past_due' });
});
afterAll(() => app.close());

test('a key lacking a scope gets an error naming it, wherever the field is, not an empty answer', async () => {
  const members = await createTenant(app.owner, ['members:read']);
  const root = await gql(members.key, '{ invoices(first: 5) { nodes { id } } }');
  expect(root.body.data).toBeUndefined();
  expect(root.body.errors).toEqual([expect.objectContaining({
    message: 'This key lacks the scope invoices:read, which invoices needs.',
    extensions: { code: 'MISSING_SCOPE', required_scope: 'invoices:read' },
  })]);
  // Through a relation of a type it may read, and through a single-row lookup.
  const nested = await gql(members.key, '{ members(first: 5) { nodes { id subscriptions(first: 5) { nodes { id } } } } }');
  expect(nested.body.errors.map((e: { extensions: { required_scope: string } }) => e.extensions.required_scope)).toEqual(['subscriptions:read']);
  const lookup = await gql(members.key, 'query($id: String!) { planById(id: $id) { id } }', { id: ids.plan });
  expect(lookup.body.errors[0].extensions.required_scope).toBe('plans:read');
  // Every view is tagged with the scope its filter checks.
  const { rows } = await app.owner.query<{ view: string; def: string; comment: string | null }>(`
    select c.relname as view, pg_get_viewdef(c.oid) as def, obj_description(c.oid, 'pg_class') as comment
    from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'billing_graphql' and c.relkind = 'v'`);
  expect(rows.length).toBeGreaterThan(20);
  for (const row of rows) {
    const checked = /has_scope\('([a-z_]+:read)'/.exec(row.def)?.[1];
    expect({ view: row.view, scope: /@scope (\S+)/.exec(row.comment ?? '')?.[1] }).toEqual({ view: row.view, scope: checked });
  }
});

test('a column its table declares not null is non-null in the schema', async () => {
  // Every view column read from a billing table column of the same name: the view
  // itself is always nullable to PostgreSQL; the table says what can be null.
  const { rows } = await app.owner.query<{ view: string; column: string; not_null: boolean }>(`
    select u.view_name as view, u.column_name as column, b.is_nullable = 'NO' as not_null
    from information_schema.view_column_usage u
    join information_schema.columns v on v.table_schema = u.view_schema and v.table_name = u.view_name and v.column_name = u.column_name
    join information_schema.columns b on b.table_schema = u.table_schema and b.table_name = u.table_name and b.column_name = u.column_name
    where u.view_schema = 'billing_graphql' and u.table_schema = 'billing'`);
  expect(rows.filter((r) => r.not_null).length).toBeGreaterThan(60);
  const byView = new Map<string, typeof rows>();
  for (const r of rows) byView.set(r.view, [...(byView.get(r.view) ?? []), r]);
  for (const [view, columns] of byView) {
    const type = await typeOf(await nodeTypeOf(camel(view)));
    for (const c of columns) {
      const field = type.fields!.find((f) => f.name === camel(c.column));
      expect({ view, column: c.column, nonNull: field?.type.kind === 'NON_NULL' }).toEqual({ view, column: c.column, nonNull: c.not_null });
    }
  }
});

test('statuses are enums of exactly the values their table allows, spelt as REST spells them', async () => {
  const { rows } = await app.owner.query<{ view: string; def: string }>(`
    select u.view_name as view, pg_get_constraintdef(k.oid) as def
    from information_schema.view_column_usage u
    join pg_constraint k on k.conrelid = (quote_ident(u.table_schema) || '.' || quote_ident(u.table_name))::regclass and k.contype = 'c'
    where u.view_schema = 'billing_graphql' and u.table_schema = 'billing' and u.column_name = 'status'
      and pg_get_constraintdef(k.oid) ~ '^CHECK \\(\\(status = ANY'`);
  expect(rows.map((r) => r.view).sort()).toEqual(['benefit_deliveries', 'invoices', 'member_entitlements', 'payment_attempts', 'purchases', 'subscriptions']);
  for (const row of rows) {
    const allowed = [...row.def.matchAll(/'([^']+)'::text/g)].map((m) => m[1]).sort();
    const type = await typeOf(await nodeTypeOf(camel(row.view)));
    const status = type.fields!.find((f) => f.name === 'status')!;
    expect(status.type.kind).toBe('NON_NULL');
    const enumType = await typeOf(named(status.type).name!);
    expect({ view: row.view, kind: enumType.kind, values: enumType.enumValues!.map((v) => v.name).sort() }).toEqual({ view: row.view, kind: 'ENUM', values: allowed });
  }
  expect(await nodeTypeOf('subscriptions').then(typeOf).then((t) => named(t.fields!.find((f) => f.name === 'status')!.type).name)).toBe('SubscriptionStatus');
  // The wire value is the one REST answers, and a condition takes the String it took
  // before the enums (a client's literal keeps working).
  const r = await gql(a.key, '{ subscriptions(first: 5, condition: { status: "past_due" }) { nodes { id status } } }');
  expect(r.body.errors).toBeUndefined();
  expect(r.body.data.subscriptions.nodes).toEqual([{ id: ids.sub, status: 'past_due' }]);
  expect((await gql(a.key, '{ subscriptions(first: 5, condition: { status: "active" }) { nodes { id } } }')).body.data.subscriptions.nodes).toEqual([]);
});

test('no connection advertises offset, and offset is refused as an unknown argument', async () => {
  const r = await gql(a.key, '{ __schema { types { name fields { name args { name } } } } }');
  const connectionFields = (r.body.data.__schema.types as { name: string; fields: { name: string; args: { name: string }[] }[] | null }[])
    .flatMap((t) => (t.fields ?? []).filter((f) => f.args.some((arg) => arg.name === 'first')).map((f) => ({ at: `${t.name}.${f.name}`, args: f.args.map((arg) => arg.name) })));
  expect(connectionFields.length).toBeGreaterThan(30);
  for (const f of connectionFields) expect(f.args).not.toContain('offset');
  const offset = await gql(a.key, '{ events(first: 10, offset: 1000000) { nodes { id } } }');
  expect(offset.body.data).toBeUndefined();
  expect(offset.body.errors[0].message).toMatch(/Unknown argument "offset"/);
});

test('relations have readable names; the generated ones stay, deprecated', async () => {
  const r = await gql(a.key, `{ subscriptions(first: 5) { nodes { id member { id } plan { amountCents tier { name } } } }
    members(first: 5) { nodes { id subscriptions(first: 5) { nodes { id } } } } tiers(first: 5) { nodes { plans(first: 5) { totalCount } } } }`);
  expect(r.body.errors).toBeUndefined();
  expect(r.body.data.subscriptions.nodes).toEqual([{ id: ids.sub, member: { id: ids.member }, plan: { amountCents: 1500, tier: { name: 'Gold' } } }]);
  expect(r.body.data.members.nodes).toEqual([{ id: ids.member, subscriptions: { nodes: [{ id: ids.sub }] } }]);
  expect(r.body.data.tiers.nodes).toEqual([{ plans: { totalCount: 1 } }]);
  const subscription = await typeOf('Subscription');
  const field = (name: string) => subscription.fields!.find((f) => f.name === name);
  expect(field('member')).toMatchObject({ isDeprecated: false });
  expect(field('memberByMemberId')).toMatchObject({ isDeprecated: true, deprecationReason: 'Use member.' });
  expect(field('invoices')).toMatchObject({ isDeprecated: false });
  expect(field('invoicesBySubscriptionId')).toMatchObject({ isDeprecated: true, deprecationReason: 'Use invoices.' });
  // Every relation of every type has its readable name.
  const all = await gql(a.key, '{ __schema { types { name fields(includeDeprecated: true) { name isDeprecated deprecationReason } } } }');
  const deprecated = (all.body.data.__schema.types as { name: string; fields: { name: string; isDeprecated: boolean; deprecationReason: string | null }[] | null }[])
    .filter((t) => t.name !== 'Query') // unique lookups (subscriptionById...) are not relations
    .flatMap((t) => (t.fields ?? []).filter((f) => /By[A-Z]\w*Id$/.test(f.name)).map((f) => ({ type: t, field: f })));
  expect(deprecated.length).toBeGreaterThan(15);
  for (const { type, field: f } of deprecated) {
    const readable = /^Use (\w+)\.$/.exec(f.deprecationReason ?? '')?.[1];
    expect({ at: `${type.name}.${f.name}`, readable: !!readable && type.fields!.some((g) => g.name === readable) }).toEqual({ at: `${type.name}.${f.name}`, readable: true });
  }
});
