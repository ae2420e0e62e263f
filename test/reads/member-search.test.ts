// Issue 31 item 2: members as people. A display name (Discord username, else Telegram,
// else email, else an external subject's id), and GET /v1/members?q= (a case-insensitive
// substring of the id, email, usernames, platform ids and external user ids; LIKE's
// wildcards literal), with filters by subscription status, tier, plan, tag and created
// range, each combinable with q and the cursor. docs/decisions/member-display-name.md,
// docs/decisions/member-search.md.
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { callTool, connect } from '../support/mcp-client';
import { Seed } from '../support/seed';

let app: TestApp;
let shop: Tenant;
let other: Tenant;
let seed: Seed;
const m: Record<string, string> = {};
let silver: string, gold: string, silverPlan: string, goldPlan: string, otherTier: string;

type Member = { id: string; display_name: string | null };
const ids = (r: { body: { data: Member[] } }) => r.body.data.map((x) => x.id);
const get = (path: string, key = shop.key) => call(app.url, 'GET', path, { key });
const search = (q: string, extra = '') => get(`/v1/members?q=${encodeURIComponent(q)}${extra}`);

beforeAll(async () => {
  app = await startApp();
  shop = await createTenant(app.owner);
  other = await createTenant(app.owner);
  seed = new Seed(app.owner, shop.communityId);
  silver = await seed.tier({ name: 'Silver' });
  gold = await seed.tier({ name: 'Gold' });
  silverPlan = await seed.plan(silver);
  goldPlan = await seed.plan(gold);
  m.both = await seed.member({ discord: 'd-4417', telegram: 't-5521', username: 'Alice_Wonder', subject: ['app', 'EXT-both'] });
  m.telegram = await seed.member({ telegram: 't-9001', username: 'tele%gram' });
  m.email = await seed.member({ discord: 'd-nameless', username: null });
  await app.owner.query('update billing.members set email = $3 where community_id = $1 and id = $2', [shop.communityId, m.email, 'Carol.Ng@Example.TEST']);
  m.subject = await seed.member({ subject: ['crm', 'Cust-00042'] });
  m.bare = await seed.member();
  m.underscore = await seed.member({ discord: 'd-u1', username: 'a_b\\c' });
  m.lookalike = await seed.member({ discord: 'd-u2', username: 'axbxc' });
  await seed.subscription(m.both, silverPlan, { status: 'active' });
  await seed.subscription(m.both, goldPlan, { status: 'cancelled' });
  await seed.subscription(m.telegram, goldPlan, { status: 'past_due' });
  await seed.subscription(m.email, silverPlan, { status: 'cancelled' });
  const old = '2025-03-01T12:00:00Z';
  await app.owner.query('update billing.members set created_at = $3 where community_id = $1 and id = $2', [shop.communityId, m.subject, old]);

  // Another community: a member that every search below would match, and a tier of its own.
  const theirs = new Seed(app.owner, other.communityId);
  otherTier = await theirs.tier();
  const theirMember = await theirs.member({ discord: 'd-4417', username: 'Alice_Wonder', subject: ['app', 'EXT-both'] });
  await theirs.subscription(theirMember, await theirs.plan(otherTier), { status: 'active' });
});
afterAll(() => app.close());

test('the display name is the Discord username, else Telegram\'s, else the email, else an external subject\'s id, else null', async () => {
  const names = Object.fromEntries((await get('/v1/members?limit=100')).body.data.map((x: Member) => [x.id, x.display_name]));
  expect(names[m.both]).toBe('Alice_Wonder');
  expect(names[m.telegram]).toBe('tele%gram');
  expect(names[m.email]).toBe('Carol.Ng@Example.TEST');
  expect(names[m.subject]).toBe('Cust-00042');
  expect(names[m.bare]).toBeNull();
});

test('the display name follows the member: a Telegram username gives way to a Discord one linked later, an email to a username', async () => {
  const s = new Seed(app.owner, shop.communityId);
  const id = await s.member({ telegram: 't-later', username: 'tg_first' });
  expect((await get(`/v1/members/${id}`)).body.display_name).toBe('tg_first');
  await app.owner.query(`insert into billing.member_identities (community_id, member_id, platform, platform_uid, username) values ($1, $2, 'discord', 'd-later', 'dc_second')`,
    [shop.communityId, id]);
  expect((await get(`/v1/members/${id}`)).body.display_name).toBe('dc_second');
  await app.owner.query(`delete from billing.member_identities where community_id = $1 and member_id = $2`, [shop.communityId, id]);
  await call(app.url, 'PATCH', `/v1/members/${id}`, { key: shop.key, body: { email: 'later@example.test' } });
  expect((await get(`/v1/members/${id}`)).body.display_name).toBe('later@example.test');
  expect(ids(await search('dc_second'))).toEqual([]);
});

test.each([
  ['a Discord username, in any case', 'alice_WONDER', 'both'],
  ['a Telegram username', 'TELE%GRAM', 'telegram'],
  ['a platform id', '4417', 'both'],
  ['another platform id of the same member', 't-5521', 'both'],
  ['an email, in any case', 'carol.ng@example', 'email'],
  ['an external user id', 'cust-0004', 'subject'],
])('q finds a member by %s', async (_what, q, who) => {
  const r = await search(q);
  expect(r.status).toBe(200);
  expect(ids(r)).toEqual([m[who]]);
});

test('q finds a member by (part of) its id', async () => {
  expect(ids(await search(m.lookalike.toUpperCase()))).toEqual([m.lookalike]);
  expect(ids(await search(m.bare.slice(-12)))).toEqual([m.bare]);
});

test('LIKE wildcards and the escape character are matched literally', async () => {
  expect(ids(await search('%'))).toEqual([m.telegram]);
  expect(ids(await search('a_b'))).toEqual([m.underscore]);
  expect(ids(await search('_b\\'))).toEqual([m.underscore]);
  expect(ids(await search('\\'))).toEqual([m.underscore]);
  expect(ids(await search('x_b'))).toEqual([]);
  expect(ids(await search('e%g'))).toEqual([m.telegram]);
});

test('a search never matches across two fields of a member', async () => {
  // search_text holds one value per line: the username and the platform id are not one string.
  expect(ids(await search('wonder d-4417'))).toEqual([]);
  expect(ids(await search('wonderd-4417'))).toEqual([]);
});

test('another community\'s members never match, whatever the search or filter', async () => {
  expect(ids(await search('alice_wonder'))).toEqual([m.both]);
  expect(ids(await search('ext-both'))).toEqual([m.both]);
  expect(ids(await get(`/v1/members?tier_id=${otherTier}`))).toEqual([]);
  expect(ids(await get(`/v1/members?q=alice&tier_id=${otherTier}`))).toEqual([]);
  const theirs = await get('/v1/members?q=alice_wonder', other.key);
  expect(theirs.body.data).toHaveLength(1);
  expect(theirs.body.data[0].id).not.toBe(m.both);
});

test.each([
  ['NUL', 'a%00b', 400],
  ['a control character', 'a%01b', 422],
  ['a line break', 'alice%0Awonder', 422],
  ['an empty search', '', 422],
  ['only spaces', '%20%20', 422],
  ['201 characters', 'x'.repeat(201), 422],
  ['8000 characters', 'x'.repeat(8000), 422],
])('q with %s is refused (%s invalid_request naming q)', async (_what, q, status) => {
  const r = await get(`/v1/members?q=${q}`);
  expect([r.status, r.body.code, r.body.param]).toEqual([status, 'invalid_request', 'q']);
});

test('a lone surrogate in q (CESU-8 in the query string, or JSON through MCP) is refused, never a 500', async () => {
  const rest = await get('/v1/members?q=%ED%A0%80');
  expect(rest.status).toBeLessThan(500);
  if (rest.status === 200) expect(rest.body.data).toEqual([]);
  const client = await connect(app.url, shop.key);
  try {
    const r = await callTool(client, 'list_members', { q: 'a\ud800b' });
    expect(r.isError).toBe(true);
    expect(r.structuredContent).toMatchObject({ code: 'invalid_request', status: 400 });
  } finally {
    await client.close();
  }
});

test('filters: subscription status, tier and plan (one subscription has them all), tag, created range', async () => {
  expect(ids(await get('/v1/members?status=active'))).toEqual([m.both]);
  expect(ids(await get('/v1/members?status=cancelled'))).toEqual([m.email, m.both]);
  expect(ids(await get(`/v1/members?tier_id=${gold}`))).toEqual([m.telegram, m.both]);
  expect(ids(await get(`/v1/members?plan_id=${silverPlan}`))).toEqual([m.email, m.both]);
  // m.both is active on silver and cancelled on gold: no one subscription is both active and gold.
  expect(ids(await get(`/v1/members?status=active&tier_id=${gold}`))).toEqual([]);
  expect(ids(await get(`/v1/members?status=cancelled&tier_id=${gold}`))).toEqual([m.both]);
  expect(ids(await get('/v1/members?created_before=2025-06-01T00:00:00Z'))).toEqual([m.subject]);
  expect(ids(await get('/v1/members?created_after=2025-03-01T12:00:00.000%2B00:00&created_before=2025-03-01T12:00:00.001Z'))).toEqual([m.subject]);
  expect(ids(await get('/v1/members?created_after=2025-03-01T12:00:00.001Z&q=cust'))).toEqual([]);
  expect(ids(await get(`/v1/members?q=alice&status=active&plan_id=${silverPlan}`))).toEqual([m.both]);
  expect(ids(await get(`/v1/members?q=tele&status=active`))).toEqual([]);
});

test.each([
  ['status=paid', 'status'],
  ['created_after=yesterday', 'created_after'],
  ['created_before=2025-13-01T00:00:00Z', 'created_before'],
  ['created_before=2025-02-29T00:00:00Z', 'created_before'],
  ['created_after=0000-01-01T00:00:00Z', 'created_after'],
  ['tag=no%20way!', 'tag'],
  [`tier_id=${'t'.repeat(101)}`, 'tier_id'],
])('a malformed filter (%s) is 422 invalid_request naming it', async (query, param) => {
  const r = await get(`/v1/members?${query}`);
  expect([r.status, r.body.code, r.body.param]).toEqual([422, 'invalid_request', param]);
});

describe('pages of a search', () => {
  const TOTAL = 2600;
  let crowd: Tenant;
  const many: string[] = [];
  const numbered = (keep: (n: number) => boolean) => many.filter((_id, i) => keep(TOTAL - i));
  beforeAll(async () => {
    crowd = await createTenant(app.owner);
    // 2,600 members crowd-N (N by age, 1 the oldest): more than the 2,000 newest that a
    // search filters in id order first. old- marks the 300 oldest (older than those
    // 2,000: found by the index), rare- every fifth, edge- a few of each part.
    await app.owner.query(`
      with m as (insert into billing.members (community_id) select $1 from generate_series(1, ${TOTAL}) returning id),
      n as (select id, row_number() over (order by id) as n from m)
      insert into billing.member_identities (community_id, member_id, platform, platform_uid, username)
      select $1, id, 'discord', 'crowd-' || n,
        case when n <= 300 then 'old-' else '' end || case when n % 5 = 0 then 'rare-' else '' end
          || case when n % 500 = 0 or n > ${TOTAL - 10} then 'edge-' else '' end || 'crowd-' || n
      from n`, [crowd.communityId]);
    many.push(...(await app.owner.query<{ id: string }>('select id from billing.members where community_id = $1 order by id desc', [crowd.communityId])).rows.map((r) => r.id));
  });

  async function pages(query: string, limit: number): Promise<string[]> {
    const out: string[] = [];
    let cursor: string | null = null;
    for (let n = 0; n < 200; n++) {
      const r: Awaited<ReturnType<typeof get>> = await get(`/v1/members?${query}&limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`, crowd.key);
      expect(r.status).toBe(200);
      out.push(...ids(r));
      cursor = r.body.next_cursor;
      if (!cursor) return out;
    }
    throw new Error('no last page');
  }

  test('a search matching every member pages through all of them, newest first, once each', async () => {
    expect(await pages('q=crowd-', 100)).toEqual(many);
  });

  test('a search matching every fifth member pages through them the same way', async () => {
    expect(await pages('q=RARE-', 100)).toEqual(numbered((n) => n % 5 === 0));
  });

  test('a search matching only members older than the newest 2,000 finds them (by index), page by page', async () => {
    expect(await pages('q=old-', 40)).toEqual(numbered((n) => n <= 300));
  });

  test('a page filled partly from the newest 2,000 and partly from older members', async () => {
    const edge = numbered((n) => n % 500 === 0 || n > TOTAL - 10);
    expect(edge).toHaveLength(15);
    const r = await get('/v1/members?q=edge-&limit=25', crowd.key);
    expect([ids(r), r.body.next_cursor]).toEqual([edge, null]);
    expect(await pages('q=edge-', 4)).toEqual(edge);
  });

  test('a search shorter than 3 characters (no trigram to look up) pages the same way', async () => {
    expect(await pages('q=-1', 100)).toEqual(numbered((n) => String(n).startsWith('1')));
  });

  test('filters without a search page the same way', async () => {
    const someOld = numbered((n) => n <= 120);
    await app.owner.query(`update billing.members set tags = '{veteran}' where community_id = $1 and id = any($2)`, [crowd.communityId, someOld]);
    expect(await pages('tag=veteran', 50)).toEqual(someOld);
    expect(await pages('tag=veteran&q=old-crowd-1', 7)).toEqual(numbered((n) => n <= 120 && String(n).startsWith('1') && n % 5 !== 0));
  });

  test('a cursor continues only the search and filters it was issued with', async () => {
    const first = await get('/v1/members?q=crowd&limit=5', crowd.key);
    const next = first.body.next_cursor as string;
    expect((await get(`/v1/members?q=crowd&limit=7&cursor=${next}`, crowd.key)).status).toBe(200);
    // q is trimmed before the cursor is bound: the same search.
    expect((await get(`/v1/members?q=%20crowd%20&cursor=${next}`, crowd.key)).status).toBe(200);
    for (const query of ['q=crowd-1', 'q=crowd&status=active', '']) {
      const r = await get(`/v1/members?${query}${query ? '&' : ''}cursor=${next}`, crowd.key);
      expect([r.status, r.body.code, r.body.param]).toEqual([400, 'invalid_request', 'cursor']);
      expect(r.body.detail).toMatch(/other filters/);
    }
  });
});
