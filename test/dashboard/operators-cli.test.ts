// billing operators invite: a user and a one-time link that signs in once.
import { signInWithLink } from '../../src/domain/operators/operator-accounts';
import { createTenant, startApp, TestApp } from '../support/app';
import { runFailing, runJson } from '../support/cli-process';

let app: TestApp;
beforeAll(async () => { app = await startApp(); });
afterAll(() => app.close());

test('operators invite prints a one-time sign-in link for the role', async () => {
  const tenant = await createTenant(app.owner);
  const out = await runJson(['operators', 'invite', '--community', tenant.communityId, '--email', 'ops@example.com', '--role', 'viewer']);
  expect(out).toMatchObject({ community_id: tenant.communityId, email: 'ops@example.com', role: 'viewer' });
  const url = new URL(out.url);
  expect(url.pathname).toBe('/dashboard/link');
  const signed = await signInWithLink(app.api, url.searchParams.get('t')!, '10.2.0.1');
  expect(signed.ok).toBe(true);
  expect((await signInWithLink(app.api, url.searchParams.get('t')!, '10.2.0.1')).ok).toBe(false);
});

test('operators invite refuses an unknown role and an unknown community', async () => {
  const bad = await runFailing(['operators', 'invite', '--community', 'com_x', '--email', 'a@example.com', '--role', 'god']);
  expect(bad.message).toMatch(/--role/);
  const none = await runFailing(['operators', 'invite', '--community', 'com_00000000000000000000000000', '--email', 'a@example.com', '--role', 'admin']);
  expect(none.message).toMatch(/No community/);
});
