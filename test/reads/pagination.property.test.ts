// Keyset pagination (spec "Common parameters"): for any page size, following
// next_cursor visits every row exactly once, newest first, and ends with null.
// Property test with a fixed seed (printed by fast-check on failure).
import fc from 'fast-check';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { Seed } from '../support/seed';

let app: TestApp;
let tenant: Tenant;
let subs: string[];
let members: string[];
let purchases: string[];

beforeAll(async () => {
  app = await startApp();
  tenant = await createTenant(app.owner);
  const seed = new Seed(app.owner, tenant.communityId);
  const plan = await seed.plan(await seed.tier());
  members = [];
  subs = [];
  purchases = [];
  for (let i = 0; i < 23; i++) {
    const m = await seed.member();
    members.push(m);
    subs.push(await seed.subscription(m, plan, { status: i % 3 === 0 ? 'cancelled' : 'active' }));
    if (i % 2 === 0) purchases.push(await seed.purchase(m, plan));
  }
  members.reverse();
  subs.reverse();
  purchases.reverse();
});
afterAll(() => app.close());

async function walk(path: string, limit: number): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const r = await call(app.url, 'GET', `${path}${sep}limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`, { key: tenant.key });
    expect(r.status).toBe(200);
    expect(r.body.data.length).toBeLessThanOrEqual(limit);
    ids.push(...r.body.data.map((x: { id: string }) => x.id));
    cursor = r.body.next_cursor;
    pages++;
    if (pages > 30) throw new Error('pagination does not end');
  } while (cursor);
  return { ids, pages };
}

test('following next_cursor lists every row once, newest first, for any limit and filter', async () => {
  await fc.assert(fc.asyncProperty(
    fc.integer({ min: 1, max: 30 }),
    fc.constantFrom('subscriptions', 'subscriptions?status=active', 'members', 'purchases'),
    async (limit, what) => {
      const expected = what === 'members' ? members : what === 'purchases' ? purchases
        : what === 'subscriptions' ? subs : subs.filter((_, i) => (subs.length - 1 - i) % 3 !== 0);
      const { ids, pages } = await walk(`/v1/${what}`, limit);
      expect(ids).toEqual(expected);
      expect(pages).toBe(Math.max(1, Math.ceil(expected.length / limit)));
    }), { seed: 4242, numRuns: 40 });
});
