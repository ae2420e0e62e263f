// Benefit deliveries in GraphQL (issue 29 item 2), read-only: billing_graphql.benefit_deliveries
// with its relation to members, fenced by the tenant policies and members:read, without
// the job's state or the platform user (95-graphql.sql).
import { createTenant, startApp, TestApp } from '../support/app';
import { deliveryWorld, DeliveryWorld } from '../platforms/delivery-views-fixture';

let app: TestApp;
let w: DeliveryWorld;
let other: DeliveryWorld;

async function gql(key: string, query: string, variables?: Record<string, unknown>) {
  const res = await fetch(`${app.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, body: await res.json() };
}

beforeAll(async () => {
  app = await startApp();
  [w, other] = await Promise.all([deliveryWorld(app.owner), deliveryWorld(app.owner)]);
});
afterAll(() => app.close());

test('a key reads its members\' deliveries, with the member relation both ways, and nothing of another community', async () => {
  const r = await gql(w.tenant.key, `query($m: String!) {
    benefitDeliveries(first: 10, orderBy: [TYPE_ASC]) { totalCount nodes { memberId platformConfigId type value want status error updatedAt member { id } } }
    memberById(id: $m) { benefitDeliveries(first: 10, orderBy: [TYPE_ASC]) { nodes { type status } } } }`, { m: w.memberId });
  expect(r.body.errors).toBeUndefined();
  const nodes = r.body.data.benefitDeliveries.nodes;
  expect(r.body.data.benefitDeliveries.totalCount).toBe(3);
  expect(nodes.map((n: Record<string, unknown>) => [n.type, n.platformConfigId, n.want, n.status, n.error, (n.member as { id: string }).id])).toEqual([
    ['channel', w.discord, 'present', 'delivered', null, w.memberId],
    ['chat', w.telegram, 'present', 'action_required', w.errors.chat, w.memberId],
    ['role', w.discord, 'present', 'action_required', w.errors.role, w.memberId]]);
  expect(nodes.every((n: { updatedAt: string }) => /^\d{4}-\d\d-\d\dT/.test(n.updatedAt))).toBe(true);
  expect(r.body.data.memberById.benefitDeliveries.nodes.map((n: { type: string }) => n.type)).toEqual(['channel', 'chat', 'role']);
  const foreign = await gql(w.tenant.key, `query($m: String!) { memberById(id: $m) { id } benefitDeliveries(condition: { memberId: $m }) { totalCount } }`, { m: other.memberId });
  expect(foreign.body.data).toEqual({ memberById: null, benefitDeliveries: { totalCount: 0 } });
});

test('neither the job\'s state nor the platform user is exposed, and members:read is required', async () => {
  const type = await gql(w.tenant.key, `{ __type(name: "BenefitDelivery") { fields { name } } }`);
  expect(type.body.data.__type.fields.map((f: { name: string }) => f.name).sort()).toEqual(
    ['error', 'member', 'memberId', 'platformConfigId', 'status', 'type', 'updatedAt', 'value', 'want']);
  const limited = await createTenant(app.owner, ['subscriptions:read']);
  const r = await gql(limited.key, '{ benefitDeliveries(first: 5) { totalCount } }');
  expect(r.body.data ?? null).toBeNull();
  expect(r.body.errors.map((e: { extensions: { required_scope: string } }) => e.extensions.required_scope)).toEqual(['members:read']);
});
