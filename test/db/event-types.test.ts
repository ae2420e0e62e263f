// Webhook event types live in one SQL catalog (billing_private.event_types), equal to
// the TypeScript list the API serves, and every door into webhook_endpoints checks
// against it (db/migrations/fixtures/*/70-webhooks.sql).
import pg from 'pg';
import { EVENT_TYPES } from '../../src/domain/events/event-types';
import { createTenant, TEST_DB, Tenant } from '../support/app';
import { createOwnerPool } from '../../src/db/pool';

let owner: pg.Pool;
let tenant: Tenant;

beforeAll(async () => {
  owner = createOwnerPool(TEST_DB());
  tenant = await createTenant(owner);
});
afterAll(() => owner.end());

test('billing_private.event_types lists exactly the EVENT_TYPES of src/domain/events/event-types.ts', async () => {
  const { rows } = await owner.query<{ type: string }>('select type from billing_private.event_types order by type');
  expect(rows.map((r) => r.type)).toEqual([...EVENT_TYPES].sort());
});

async function insertEndpoint(eventTypes: string[]): Promise<unknown> {
  return owner.query(`insert into billing.webhook_endpoints (community_id, url, event_types) values ($1, 'https://example.com/h', $2)`,
    [tenant.communityId, eventTypes]);
}

test('an endpoint written in SQL with an unknown event type is refused with BL422 naming the element', async () => {
  await expect(insertEndpoint(['member.created', 'member.exploded'])).rejects.toMatchObject({ code: 'BL422', detail: 'event_types.1' });
  const { rows: [e] } = await owner.query<{ id: string }>(
    `insert into billing.webhook_endpoints (community_id, url, event_types) values ($1, 'https://example.com/h', $2) returning id`,
    [tenant.communityId, ['member.created']]);
  await expect(owner.query(`update billing.webhook_endpoints set event_types = '{Nope}' where id = $1`, [e.id]))
    .rejects.toMatchObject({ code: 'BL422', detail: 'event_types.0' });
  await owner.query('delete from billing.webhook_endpoints where id = $1', [e.id]);
});

test('every catalog event type is accepted in SQL', async () => {
  const { rows: [e] } = await owner.query<{ id: string }>(
    `insert into billing.webhook_endpoints (community_id, url, event_types) values ($1, 'https://example.com/h', $2) returning id`,
    [tenant.communityId, [...EVENT_TYPES]]);
  await owner.query('delete from billing.webhook_endpoints where id = $1', [e.id]);
});
