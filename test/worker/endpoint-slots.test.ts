// An endpoint's slots shared by worker processes (worker/tasks/endpoint-slots.ts): each
// process holds its slots as advisory locks on a session of its own. Two instances here
// stand for two processes (two sessions); the many-process bound itself is in
// test/worker/many-processes.test.ts.
import net from 'node:net';
import pg from 'pg';
import { TEST_DB } from '../support/app';
import { SharedEndpointSlots } from '../../worker/tasks/endpoint-slots';

let owner: pg.Pool;
const made: SharedEndpointSlots[] = [];
const slots = () => {
  const s = new SharedEndpointSlots(TEST_DB(), 2000);
  made.push(s);
  return s;
};
let n = 0;
const endpoint = () => `we_slots_${process.pid}_${++n}`;

beforeAll(() => { owner = new pg.Pool({ connectionString: TEST_DB(), max: 2 }); });
afterAll(async () => {
  await Promise.all(made.map((s) => s.close()));
  await owner.end();
});

test('two processes share one endpoint\'s slots: the share over both, a slot given back is free again', async () => {
  const [a, b] = [slots(), slots()];
  const e = endpoint();
  const a0 = await a.take('com_x', e, 2);
  const b0 = await b.take('com_x', e, 2);
  expect([a0?.slot, b0?.slot].sort()).toEqual([0, 1]);
  // Both held: neither process gets a third.
  expect(await a.take('com_x', e, 2)).toBeNull();
  expect(await b.take('com_x', e, 2)).toBeNull();
  // Another endpoint, or another community's endpoint of the same id, is not affected.
  expect(await a.take('com_x', endpoint(), 2)).not.toBeNull();
  expect(await a.take('com_y', e, 2)).not.toBeNull();
  await b.give(b0!);
  expect((await a.take('com_x', e, 2))?.slot).toBe(b0!.slot);
});

test('one process never takes the same slot twice (a session\'s advisory locks are re-entrant)', async () => {
  const a = slots();
  const e = endpoint();
  const first = await a.take('com_x', e, 3);
  const second = await a.take('com_x', e, 3);
  const third = await a.take('com_x', e, 3);
  expect([first?.slot, second?.slot, third?.slot]).toEqual([0, 1, 2]);
  expect(await a.take('com_x', e, 3)).toBeNull();
  // A slow endpoint's share is 1: one held is enough to refuse.
  const slow = endpoint();
  expect(await a.take('com_x', slow, 1)).not.toBeNull();
  expect(await a.take('com_x', slow, 1)).toBeNull();
});

test('takes in flight at once in one process get different slots', async () => {
  const a = slots();
  const e = endpoint();
  const got = await Promise.all([a.take('com_x', e, 3), a.take('com_x', e, 3), a.take('com_x', e, 3), a.take('com_x', e, 3)]);
  expect(got.map((h) => h?.slot ?? null).sort()).toEqual([0, 1, 2, null]);
});

test('a process whose session is cut loses its slots at once; its old slots given back leave the others alone', async () => {
  const [a, b] = [slots(), slots()];
  const e = endpoint();
  const held = [await a.take('com_x', e, 2), await a.take('com_x', e, 2)];
  expect(held.map((h) => h?.slot)).toEqual([0, 1]);
  expect(await b.take('com_x', e, 2)).toBeNull();
  // The server ends a's session (as a restart or a cut connection would).
  await owner.query(`select pg_terminate_backend(pid) from pg_stat_activity
    where application_name = 'billing-worker-slots' and pid in (select pid from pg_locks where locktype = 'advisory' and objid = 1
      and classid = (hashtext($1) & 4294967295)::oid)`, [`webhook-endpoint com_x ${e}`]);
  let bHeld = null;
  for (let i = 0; i < 50 && !bHeld; i++) {
    bHeld = await b.take('com_x', e, 2);
    if (!bHeld) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  expect(bHeld).not.toBeNull();
  // a notices on its next call and starts a new session; its old slots are gone with the
  // old one, so giving them back unlocks nothing b holds.
  let again = await a.take('com_x', e, 2);
  if (again === undefined) again = await a.take('com_x', e, 2);
  expect(again).not.toBeNull();
  for (const h of held) await a.give(h!);
  const { rows: [{ locks }] } = await owner.query<{ locks: number }>(
    `select count(*)::int as locks from pg_locks where locktype = 'advisory' and granted and classid = (hashtext($1) & 4294967295)::oid`,
    [`webhook-endpoint com_x ${e}`]);
  expect(locks).toBe(2);
});

test('a database that cannot be reached answers undefined at once: the process\'s own bound holds alone', async () => {
  // A port nothing listens on.
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  const url = new URL(TEST_DB());
  url.port = String(port);
  const gone = new SharedEndpointSlots(url.toString(), 2000);
  made.push(gone);
  const started = Date.now();
  expect(await gone.take('com_x', endpoint(), 2)).toBeUndefined();
  expect(Date.now() - started).toBeLessThan(2000);
});
