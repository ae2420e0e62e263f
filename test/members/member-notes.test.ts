// Issue 31 item 2: operators add a note and tags to a member (PATCH /v1/members/{id},
// additive): bounded, control characters refused, tags normalised; the list filters by
// tag. Personal data: read with the member (members:read), never in an event (so never
// in a webhook), never in a log, never matched by q. docs/decisions/member-notes.md.
import { captureLogs } from '../../src/core/log';
import { createKey } from '../../src/domain/communities/community-admin';
import { call, createTenant, startApp, Tenant, TestApp } from '../support/app';
import { callTool, connect } from '../support/mcp-client';
import { Seed } from '../support/seed';
import { events } from '../support/shop';

let app: TestApp;
let shop: Tenant;
let seed: Seed;

const patch = (id: string, body: unknown, opts: { key?: string; headers?: Record<string, string> } = {}) =>
  call(app.url, 'PATCH', `/v1/members/${id}`, { key: opts.key ?? shop.key, body, headers: opts.headers });
const get = (path: string, key = shop.key) => call(app.url, 'GET', path, { key });

beforeAll(async () => {
  app = await startApp();
  shop = await createTenant(app.owner);
  seed = new Seed(app.owner, shop.communityId);
});
afterAll(() => app.close());

test('an operator sets a note and tags, normalised; a field left out is kept; null and [] clear them', async () => {
  const id = await seed.member({ discord: 'd-notes-1', username: 'notes_one' });
  const set = await patch(id, { note: '  Called on Monday.\r\nPrefers\tDMs.  ', tags: [' VIP  Customer ', 'beta', 'vip-customer', 'Beta', 'Équipe'] });
  expect(set.status).toBe(200);
  expect(set.body).toMatchObject({ id, note: 'Called on Monday.\nPrefers\tDMs.', tags: ['beta', 'vip-customer', 'équipe'], display_name: 'notes_one', email: null });
  expect((await get(`/v1/members/${id}`)).body).toMatchObject({ note: 'Called on Monday.\nPrefers\tDMs.', tags: ['beta', 'vip-customer', 'équipe'] });

  const email = await patch(id, { email: 'notes@example.test' });
  expect(email.body).toMatchObject({ email: 'notes@example.test', note: 'Called on Monday.\nPrefers\tDMs.', tags: ['beta', 'vip-customer', 'équipe'] });
  const tagsOnly = await patch(id, { tags: ['gold'] });
  expect(tagsOnly.body).toMatchObject({ note: 'Called on Monday.\nPrefers\tDMs.', tags: ['gold'], email: 'notes@example.test' });
  const cleared = await patch(id, { note: null, tags: [] });
  expect(cleared.body).toMatchObject({ note: null, tags: [], email: 'notes@example.test' });
});

test.each([
  ['a note of 2001 characters', { note: 'x'.repeat(2001) }, 'note'],
  ['an empty note (null clears)', { note: '   ' }, 'note'],
  ['a note with a control character', { note: 'ring \u0007 the bell' }, 'note'],
  ['a note with an escape sequence', { note: 'red \u001b[31m text' }, 'note'],
  ['a note with a C1 control', { note: 'next\u0085line' }, 'note'],
  ['21 tags', { tags: Array.from({ length: 21 }, (_v, i) => `t${i}`) }, 'tags'],
  ['a tag of 41 characters', { tags: ['a'.repeat(41)] }, 'tags.0'],
  ['an empty tag', { tags: ['ok', '  '] }, 'tags.1'],
  ['a tag with a comma', { tags: ['a,b'] }, 'tags.0'],
  ['a tag with a control character', { tags: ['a\u0001b'] }, 'tags.0'],
  ['a tag with punctuation', { tags: ['vip!'] }, 'tags.0'],
  ['tags that are not a list', { tags: 'vip' }, 'tags'],
  ['tags null', { tags: null }, 'tags'],
])('%s is 422 invalid_request naming the field; nothing changes', async (_what, body, param) => {
  const id = await seed.member();
  await patch(id, { note: 'kept', tags: ['kept'] });
  const r = await patch(id, body);
  expect([r.status, r.body.code, r.body.param]).toEqual([422, 'invalid_request', param]);
  expect((await get(`/v1/members/${id}`)).body).toMatchObject({ note: 'kept', tags: ['kept'] });
});

test('a NUL or a lone surrogate in a note or tag is 400 before anything runs', async () => {
  const id = await seed.member();
  for (const body of ['{"note": "a\\u0000b"}', '{"note": "a\\ud800b"}', '{"tags": ["a\\udc00"]}']) {
    const r = await call(app.url, 'PATCH', `/v1/members/${id}`, { key: shop.key, rawBody: body, headers: { 'content-type': 'application/json' } });
    expect([r.status, r.body.code]).toEqual([400, 'invalid_request']);
  }
});

test('a note of exactly 2000 characters and 20 tags of 40 characters are kept', async () => {
  const id = await seed.member();
  const tags = Array.from({ length: 20 }, (_v, i) => `${String(i).padStart(2, '0')}${'t'.repeat(38)}`);
  const r = await patch(id, { note: 'n'.repeat(2000), tags });
  expect(r.status).toBe(200);
  expect(r.body.note).toHaveLength(2000);
  expect(r.body.tags).toEqual(tags);
});

test('the database refuses what the API would: billing.member_note_valid and member_tags_valid hold the rules', async () => {
  const { rows } = await app.owner.query<{ n: boolean[]; t: boolean[] }>(`select
    array[billing.member_note_valid('ok'), billing.member_note_valid(''), billing.member_note_valid(repeat('x', 2001)),
          billing.member_note_valid(E'a\\rb'), billing.member_note_valid(E'a\\nb\\tc'), billing.member_note_valid(E'a\\u009fb')] as n,
    array[billing.member_tags_valid('{}'), billing.member_tags_valid('{vip,beta}'), billing.member_tags_valid('{vip,vip}'),
          billing.member_tags_valid('{VIP}'), billing.member_tags_valid('{"a b"}'), billing.member_tags_valid('{"a,b"}'),
          billing.member_tags_valid(array_fill('x'::text, array[21])), billing.member_tags_valid(array[repeat('x', 41)])] as t`);
  expect(rows[0].n).toEqual([true, false, false, false, true, false]);
  expect(rows[0].t).toEqual([true, true, false, false, false, false, false, false]);
});

test('an Idempotency-Key replays the first answer; the same key with another body is refused', async () => {
  const id = await seed.member();
  const key = `notes-${Date.now()}`;
  const first = await patch(id, { note: 'first' }, { headers: { 'Idempotency-Key': key } });
  await patch(id, { note: 'meanwhile' });
  const again = await patch(id, { note: 'first' }, { headers: { 'Idempotency-Key': key } });
  expect(again.status).toBe(200);
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  expect(again.body).toEqual(first.body);
  expect((await get(`/v1/members/${id}`)).body.note).toBe('meanwhile');
  const other = await patch(id, { note: 'second' }, { headers: { 'Idempotency-Key': key } });
  expect([other.status, other.body.code]).toEqual([422, 'idempotency_key_reuse']);
});

test('writing needs members:write; reading needs members:read, which reads the note too', async () => {
  const id = await seed.member();
  await patch(id, { note: 'read me', tags: ['seen'] });
  const reader = await createTenant(app.owner, ['members:read']);
  // another community's key cannot reach this member at all
  expect((await patch(id, { note: 'x' }, { key: reader.key })).status).toBe(403);
  const readOnly = await createKey(app.owner, shop.communityId, ['members:read']);
  const refused = await patch(id, { note: 'x' }, { key: readOnly.key });
  expect([refused.status, refused.body.code, refused.body.required_scope]).toEqual([403, 'missing_scope', 'members:write']);
  expect((await get(`/v1/members/${id}`, readOnly.key)).body).toMatchObject({ note: 'read me', tags: ['seen'] });
  expect((await get(`/v1/members/${id}`, reader.key)).status).toBe(404);
});

test('the list filters by tag, normalised as tags are, with the search and the cursor', async () => {
  const a = await seed.member({ discord: 'd-tagged-a', username: 'tagged_a' });
  const b = await seed.member({ discord: 'd-tagged-b', username: 'tagged_b' });
  const c = await seed.member({ discord: 'd-tagged-c', username: 'tagged_c' });
  await patch(a, { tags: ['Early Bird'] });
  await patch(b, { tags: ['early-bird', 'press'] });
  await patch(c, { tags: ['press'] });
  const ids = (r: { body: { data: { id: string }[] } }) => r.body.data.map((x) => x.id);
  expect(ids(await get('/v1/members?tag=EARLY%20bird'))).toEqual([b, a]);
  expect(ids(await get('/v1/members?tag=press&q=tagged'))).toEqual([c, b]);
  const first = await get('/v1/members?tag=early-bird&limit=1');
  expect(ids(first)).toEqual([b]);
  const second = await get(`/v1/members?tag=Early%20Bird&limit=1&cursor=${first.body.next_cursor}`);
  expect(ids(second)).toEqual([a]);
  expect((await get(`/v1/members?tag=press&limit=1&cursor=${first.body.next_cursor}`)).status).toBe(400);
});

test('MCP list_members finds and filters members, and its output (note and tags included) holds to the tool\'s outputSchema', async () => {
  const id = await seed.member({ discord: 'd-mcp-notes', username: 'mcp_notes_member' });
  await patch(id, { note: 'From the MCP test.', tags: ['mcp'] });
  const client = await connect(app.url, shop.key);
  try {
    // The official client itself refuses structuredContent that breaks the advertised outputSchema.
    const r = await callTool(client, 'list_members', { q: 'MCP_NOTES', tag: 'MCP', limit: 5 });
    expect(r.isError).toBeFalsy();
    expect((r.structuredContent as { data: unknown[] }).data).toEqual([expect.objectContaining({
      id, display_name: 'mcp_notes_member', note: 'From the MCP test.', tags: ['mcp'] })]);
  } finally {
    await client.close();
  }
});

test('a note, tags and display name are in no event and no log line; a search is in no log line; q never matches a note', async () => {
  const logs = captureLogs('debug');
  const secretNote = `Confidential-${Date.now()}: owes us a call`;
  const username = `loggy_${Date.now()}`;
  try {
    const id = await seed.member();
    // an identity linked: member.updated (and the display name changes)
    await app.owner.query(`insert into billing.member_identities (community_id, member_id, platform, platform_uid, username) values ($1, $2, 'discord', $3, $4)`,
      [shop.communityId, id, `d-${username}`, username]);
    expect((await patch(id, { note: secretNote, tags: ['hush-hush'] })).status).toBe(200);
    expect((await patch(id, { note: 'x'.repeat(2001) })).status).toBe(422);
    expect((await get(`/v1/members?q=${encodeURIComponent(username.toUpperCase())}`)).body.data.map((m: { id: string }) => m.id)).toEqual([id]);
    expect((await get(`/v1/members?q=${encodeURIComponent('Confidential-')}`)).body.data).toEqual([]);
    expect((await get('/v1/members?tag=hush-hush')).body.data).toHaveLength(1);
    expect((await get(`/v1/members?q=${'%'.repeat(201)}`)).status).toBe(422);

    const all = await events(app.owner, shop.communityId);
    const updated = all.filter((e) => e.type === 'member.updated' && JSON.stringify(e.data).includes(id));
    expect(updated.length).toBeGreaterThan(0);
    for (const e of updated) expect(Object.keys((e.data as { member: object }).member).sort()).toEqual(['created_at', 'external_subjects', 'id', 'identities']);
    const text = JSON.stringify(all);
    expect(text).not.toContain('Confidential-');
    expect(text).not.toContain('hush-hush');
    expect(text).not.toMatch(/"(display_name|note|tags)"/);
  } finally {
    logs.stop();
  }
  const logged = logs.text();
  expect(logged).toContain('/v1/members'); // the access lines are there, by route template
  expect(logged).not.toContain('Confidential-');
  expect(logged).not.toContain('hush-hush');
  expect(logged.toLowerCase()).not.toContain(username);
});

test('GraphQL reads the display name, note and tags', async () => {
  const id = await seed.member({ telegram: 't-graph', username: 'graph_person' });
  await patch(id, { note: 'GraphQL note', tags: ['graph'] });
  const res = await fetch(`${app.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${shop.key}` },
    body: JSON.stringify({ query: '{ members(first: 100) { nodes { id displayName note tags } } }' }) });
  const body = await res.json() as { data: { members: { nodes: unknown[] } } };
  expect(body.data.members.nodes).toContainEqual({ id, displayName: 'graph_person', note: 'GraphQL note', tags: ['graph'] });
});
