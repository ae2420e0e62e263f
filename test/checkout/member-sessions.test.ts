// Portal sessions (url valid ten minutes) and link codes (ten minutes, one-time; a new
// code replaces the earlier one; redeem_link_code attaches the platform identity).
import { call, startApp, TestApp } from '../support/app';
import { advance, checkout, createShop, externalSubject, Shop, subscribe } from '../support/shop';

let app: TestApp;
let shop: Shop;
beforeAll(async () => {
  app = await startApp();
  shop = await createShop(app);
});
afterAll(() => app.close());

const post = (path: string, body?: unknown, s: Shop = shop) => call(app.url, 'POST', path, { key: s.key, body });

async function newMember(s: Shop = shop): Promise<string> {
  const r = await checkout(app, s, { tier_id: s.ids.tiers.silver, subject: externalSubject() });
  return r.body.member_id;
}

describe('portal sessions', () => {
  test('answer a url valid for ten minutes that lists the member\'s subscriptions', async () => {
    const { memberId } = await subscribe(app, shop, 'silver');
    const r = await post(`/v1/members/${memberId}/portal-sessions`, { return_url: 'https://shop.example/account' });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(['expires_at', 'url']);
    const ttl = new Date(r.body.expires_at).getTime() - Date.now();
    expect(ttl).toBeGreaterThan(9.9 * 60e3);
    expect(ttl).toBeLessThanOrEqual(10 * 60e3);
    const page = await fetch(r.body.url);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('Silver');
    expect(html).toContain('https://shop.example/account');
    const noBody = await post(`/v1/members/${memberId}/portal-sessions`);
    expect(noBody.status).toBe(200);
  });

  test('a bad return_url answers 422 invalid_request; an unknown member 404', async () => {
    const member = await newMember();
    for (const return_url of ['http://shop.example/x', 'not a url', 42]) {
      const r = await post(`/v1/members/${member}/portal-sessions`, { return_url });
      expect(r.status).toBe(422);
      expect(r.body).toMatchObject({ code: 'invalid_request', param: 'return_url' });
    }
    expect((await post('/v1/members/mem_00000000000000000000000000/portal-sessions', {})).status).toBe(404);
  });

  test('the portal url stops working after ten minutes', async () => {
    const s = await createShop(app);
    const member = await newMember(s);
    const r = await post(`/v1/members/${member}/portal-sessions`, {}, s);
    await advance(app, s, 11 / 1440);
    expect((await fetch(r.body.url)).status).toBe(410);
  });
});

describe('link codes', () => {
  test('create answers {code, member_id, intended_platform, expires_at} valid ten minutes', async () => {
    const member = await newMember();
    const r = await post(`/v1/members/${member}/link-codes`, { intended_platform: 'discord' });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ code: expect.any(String), member_id: member, intended_platform: 'discord', expires_at: expect.any(String) });
    expect(new Date(r.body.expires_at).getTime() - Date.now()).toBeGreaterThan(9.9 * 60e3);
  });

  test('an unknown platform answers 422; an unknown member 404', async () => {
    const member = await newMember();
    const bad = await post(`/v1/members/${member}/link-codes`, { intended_platform: 'myspace' });
    expect(bad.status).toBe(422);
    expect(bad.body.code).toBe('invalid_request');
    expect((await post('/v1/members/mem_00000000000000000000000000/link-codes', { intended_platform: 'discord' })).status).toBe(404);
  });

  test('redeem attaches the identity and the code works once', async () => {
    const member = await newMember();
    const { body: lc } = await post(`/v1/members/${member}/link-codes`, { intended_platform: 'discord' });
    const r = await post('/v1/link-codes/redeem', { code: lc.code.toLowerCase(), platform: 'discord', platform_uid: `u-${member}`, username: 'ann' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ id: member, identities: [{ platform: 'discord', platform_uid: `u-${member}`, username: 'ann' }] });
    const again = await post('/v1/link-codes/redeem', { code: lc.code, platform: 'discord', platform_uid: `u-${member}` });
    expect(again.status).toBe(404);
  });

  test('a new code for the same member and platform invalidates the earlier one', async () => {
    const member = await newMember();
    const first = await post(`/v1/members/${member}/link-codes`, { intended_platform: 'telegram' });
    const second = await post(`/v1/members/${member}/link-codes`, { intended_platform: 'telegram' });
    const discord = await post(`/v1/members/${member}/link-codes`, { intended_platform: 'discord' });
    expect((await post('/v1/link-codes/redeem', { code: first.body.code, platform: 'telegram', platform_uid: `t-${member}` })).status).toBe(404);
    expect((await post('/v1/link-codes/redeem', { code: second.body.code, platform: 'telegram', platform_uid: `t-${member}` })).status).toBe(200);
    // Codes for another platform are independent, and a code only redeems on its platform.
    expect((await post('/v1/link-codes/redeem', { code: discord.body.code, platform: 'telegram', platform_uid: 'x' })).status).toBe(404);
    expect((await post('/v1/link-codes/redeem', { code: discord.body.code, platform: 'discord', platform_uid: `d-${member}` })).status).toBe(200);
  });

  test('an identity that belongs to another member answers 409', async () => {
    const owner = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: { platform: 'discord', platform_uid: 'taken-1' } });
    expect(owner.status).toBe(200);
    const member = await newMember();
    const { body: lc } = await post(`/v1/members/${member}/link-codes`, { intended_platform: 'discord' });
    const r = await post('/v1/link-codes/redeem', { code: lc.code, platform: 'discord', platform_uid: 'taken-1' });
    expect(r.status).toBe(409);
    expect(r.body.code).toBe('conflict');
  });

  test('an expired code cannot be redeemed and its expiry changes nothing', async () => {
    const s = await createShop(app);
    const member = await newMember(s);
    const { body: lc } = await post(`/v1/members/${member}/link-codes`, { intended_platform: 'discord' }, s);
    const before = await call(app.url, 'GET', `/v1/members/${member}`, { key: s.key });
    await advance(app, s, 11 / 1440);
    const r = await post('/v1/link-codes/redeem', { code: lc.code, platform: 'discord', platform_uid: 'late' }, s);
    expect(r.status).toBe(404);
    const after = await call(app.url, 'GET', `/v1/members/${member}`, { key: s.key });
    expect(after.body).toEqual(before.body);
  });
});
