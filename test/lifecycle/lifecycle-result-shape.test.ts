// Issue 28 item 3: the lifecycle functions of 40-subscriptions.sql (cancel, pause,
// resume, reactivate, switch, cancel a scheduled switch) return an explicit result,
// {"subscription": the public answer, "changed", "provider": the provider call's facts},
// never the public JSON with private "_provider"/"_changed" keys in it; and no public
// answer of those operations (REST; MCP's switch_subscription) carries a key starting
// with "_".
import { hashKey } from '../../src/core/ids';
import { call, startApp, TestApp } from '../support/app';
import { callTool, connect, resultJson } from '../support/mcp-client';
import { createShop, Shop, subscribe } from '../support/shop';

let app: TestApp;

beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

type Json = Record<string, unknown>;

/** Every key of a JSON value, nested ones too, that starts with "_". */
function privateKeys(value: unknown, at = ''): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => privateKeys(v, `${at}[${i}]`));
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([k, v]) => [...(k.startsWith('_') ? [`${at}.${k}`] : []), ...privateKeys(v, `${at}.${k}`)]);
}

test('each lifecycle function returns {subscription, changed, provider}, its public part free of private keys', async () => {
  const shop = await createShop(app);
  const { subscriptionId: id } = await subscribe(app, shop, 'gold', 'gold-monthly');
  const client = await app.api.connect();
  try {
    await client.query('begin');
    // As a request does: the gate sets the key's community for the transaction.
    await client.query("select billing.gate_open($1, '127.0.0.1', '{}', null)", [hashKey(shop.key)]);
    const run = async (fn: string, args: Json = {}) =>
      (await client.query<{ r: Json }>(`select billing_api.${fn}($1) as r`, [{ id, ...args }])).rows[0].r;
    const expectShape = (r: Json, changed: boolean) => {
      expect(Object.keys(r).sort()).toEqual(['changed', 'provider', 'subscription']);
      expect(r.changed).toBe(changed);
      expect(r.provider).toMatchObject({ provider: 'sandbox', provider_ref: null, plan_id: expect.any(String) });
      expect(privateKeys(r.subscription)).toEqual([]);
    };
    const subscriptionAnswer = (r: Json, status: string) => expect(r.subscription).toMatchObject({ id, status, member_id: expect.any(String) });

    const down = await run('subscription_switch', { plan_id: shop.ids.plans['silver-monthly'] });
    expectShape(down, true);
    subscriptionAnswer(down, 'active');
    expect(down.provider).toMatchObject({ kind: 'scheduled', new_plan_id: shop.ids.plans['silver-monthly'], new_stripe_price_id: 'price_silver_m', old_stripe_price_id: 'price_gold_m' });
    expectShape(await run('subscription_cancel_scheduled_switch'), true);

    const paused = await run('subscription_pause');
    expectShape(paused, true);
    subscriptionAnswer(paused, 'paused');
    expect(paused.provider).toMatchObject({ resumes_at: null });
    expectShape(await run('subscription_pause'), false);
    subscriptionAnswer(await run('subscription_resume'), 'active');

    const cancel = await run('subscription_cancel');
    expectShape(cancel, true);
    expect(cancel.subscription).toEqual({ status: 'cancelling' });
    const again = await run('subscription_cancel');
    expectShape(again, false);
    expect(again.subscription).toEqual({ status: 'cancelling' });
    const reactivated = await run('subscription_reactivate');
    expectShape(reactivated, true);
    subscriptionAnswer(reactivated, 'active');

    const now = await run('subscription_cancel', { at: 'now' });
    expectShape(now, true);
    expect(now.subscription).toEqual({ status: 'cancelled' });
    expect(now.provider).toMatchObject({ at: 'now' });
    expectShape(await run('subscription_cancel', { at: 'now' }), false);
  } finally {
    await client.query('rollback');
    client.release();
  }
});

test('no REST or MCP answer of the lifecycle operations carries a key starting with "_"', async () => {
  const shop = await createShop(app);
  const { subscriptionId: id } = await subscribe(app, shop, 'gold', 'gold-monthly');
  const post = async (path: string, body?: unknown) => {
    const r = await call(app.url, 'POST', `/v1/subscriptions/${id}/${path}`, { key: shop.key, body });
    expect(r.status).toBeLessThan(300);
    return r.body as Json;
  };
  const answers: [string, unknown][] = [];
  answers.push(['switch', await post('switch', { plan_id: shop.ids.plans['silver-monthly'] })]);
  answers.push(['cancel-scheduled-switch', await post('cancel-scheduled-switch')]);
  answers.push(['pause', await post('pause')]);
  answers.push(['pause again', await post('pause')]);
  answers.push(['resume', await post('resume')]);
  answers.push(['cancel', await post('cancel')]);
  answers.push(['cancel again', await post('cancel')]);
  answers.push(['reactivate', await post('reactivate')]);
  expect(answers[0][1]).toMatchObject({ id, scheduled_plan_id: shop.ids.plans['silver-monthly'] });
  expect(answers[5][1]).toEqual({ status: 'cancelling' });

  const mcp = await connect(app.url, shop.key);
  try {
    const tool = async (name: string, args: Json = {}) => {
      const result = await callTool(mcp, name, { subscription_id: id, ...args });
      expect(result.isError).toBeFalsy();
      return resultJson(result);
    };
    // switch_subscription is the one lifecycle tool MCP offers (src/mcp/tools.ts).
    answers.push(['mcp switch_subscription', await tool('switch_subscription', { plan_id: shop.ids.plans['platinum-monthly'] })]);
    answers.push(['mcp switch_subscription scheduled', await tool('switch_subscription', { plan_id: shop.ids.plans['silver-monthly'] })]);
  } finally {
    await mcp.close();
  }
  expect(answers.map(([what, body]) => [what, privateKeys(body)])).toEqual(answers.map(([what]) => [what, []]));
});
