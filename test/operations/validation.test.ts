// Input validation through the registry: unknown fields are refused by name (as
// Stripe does, so a typo such as plan_idd cannot pass silently).
import { z } from 'zod';
import { parseInput } from '../../src/operations/executor';
import { pageQuery } from '../../src/domain/fields';
import { defineOperation } from '../../src/domain/operation';

const op = defineOperation({
  name: 'test_switch', method: 'POST', path: '/v1/things/{id}', scope: 'subscriptions:write', tag: 'Test',
  summary: 'test', params: z.object({ id: z.string() }), body: z.object({ plan_id: z.string() }),
  handler: async () => ({}),
});
const list = defineOperation({
  name: 'test_list', method: 'GET', path: '/v1/things', scope: 'subscriptions:read', tag: 'Test',
  summary: 'test', query: z.object({ ...pageQuery, status: z.enum(['active']).optional() }), sql: 'x',
});

test('an unknown body field answers 422 invalid_request naming it', () => {
  const r = parseInput(op, { params: { id: 'x' }, body: { plan_idd: 'p' } });
  expect(r.ok).toBe(false);
  if (r.ok) return;
  // plan_id is also missing; the unknown field is the more useful report either way.
  expect(r.error.status).toBe(422);
  expect(r.error.code).toBe('invalid_request');
  expect(r.error.message).toMatch(/plan_idd|plan_id/);
  const r2 = parseInput(op, { params: { id: 'x' }, body: { plan_id: 'p', plan_idd: 'p' } });
  expect(r2.ok).toBe(false);
  if (!r2.ok) {
    expect(r2.error.message).toContain('plan_idd');
    expect(r2.error.extra.param).toBe('plan_idd');
  }
});

test('a body that is not an object answers 400', () => {
  for (const body of [[], 'x', 3, null]) {
    const r = parseInput(op, { params: { id: 'x' }, body });
    expect(r.ok ? 0 : r.error.status).toBe(400);
  }
});

test('limit is 1 to 100, default 25; out of range answers 422 naming limit', () => {
  const d = parseInput(list, { query: {} });
  expect(d.ok && d.input.limit).toBe(25);
  for (const limit of ['0', '101', 'abc', '1.5']) {
    const r = parseInput(list, { query: { limit } });
    expect(r.ok ? 0 : [r.error.status, r.error.extra.param]).toEqual([422, 'limit']);
  }
  const ok = parseInput(list, { query: { limit: '100' } });
  expect(ok.ok && ok.input.limit).toBe(100);
});

test('cursors round-trip and tampered ones answer 400', () => {
  const { encodeCursor, filtersDigest } = jest.requireActual('../../src/core/cursor');
  const id = 'sub_0193a4b5c6d7e8f9a0b1c2d3e4';
  const r = parseInput(list, { query: { cursor: encodeCursor(id, { list: 'test_list', filters: filtersDigest({}) }) } });
  expect(r.ok && r.input.cursor).toBe(id);
  const bad = parseInput(list, { query: { cursor: 'not-a-cursor' } });
  expect(bad.ok ? 0 : [bad.error.status, bad.error.code]).toEqual([400, 'invalid_request']);
});

test('an unknown query parameter answers 400 invalid_request naming it, for every door (issue 26 item 7)', () => {
  for (const [query, param] of [[{ starting_after: 'x' }, 'starting_after'], [{ 'expand[]': 'member', limit: '5' }, 'expand[]'], [{ __proto__x: '1' }, '__proto__x'], [{ constructor: '1' }, 'constructor']] as const) {
    const r = parseInput(list, { query: { ...query } });
    expect(r.ok ? 0 : [r.error.status, r.error.code, r.error.extra.param]).toEqual([400, 'invalid_request', param]);
  }
  // An operation without a query schema takes no query parameter at all.
  const r = parseInput(op, { params: { id: 'x' }, query: { dry_run: 'true' }, body: { plan_id: 'p' } });
  expect(r.ok ? 0 : [r.error.status, r.error.extra.param]).toEqual([400, 'dry_run']);
  expect(parseInput(list, { query: { status: 'active', limit: '5' } }).ok).toBe(true);
});
