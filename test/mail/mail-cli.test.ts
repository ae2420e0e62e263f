// `billing communities mail`: the community's sender name and reply-to for mail to
// members (docs/decisions/mail-outbox.md), checked by the database.
import { createTenant, startApp, TestApp, TEST_DB } from '../support/app';
import { cli } from '../support/cli';

let app: TestApp;
beforeAll(async () => {
  app = await startApp();
  process.env.DATABASE_URL = TEST_DB();
});
afterAll(() => app.close());

const mailOf = async (id: string) => (await app.owner.query(
  'select mail_sender_name, mail_reply_to from billing.communities where id = $1', [id])).rows[0];

test('communities mail sets and clears the sender name and reply-to; a bad address is a usage error', async () => {
  const { communityId } = await createTenant(app.owner);
  const set = await cli('communities', 'mail', communityId, '--sender-name', 'Acme Club', '--reply-to', 'help@acme.test', '--json');
  expect(set.code).toBe(0);
  expect(JSON.parse(set.out)).toEqual({ id: communityId, mail_sender_name: 'Acme Club', mail_reply_to: 'help@acme.test' });
  expect(await mailOf(communityId)).toEqual({ mail_sender_name: 'Acme Club', mail_reply_to: 'help@acme.test' });
  const bad = await cli('communities', 'mail', communityId, '--reply-to', 'not an address');
  expect(bad.code).toBe(2);
  expect(await mailOf(communityId)).toEqual({ mail_sender_name: 'Acme Club', mail_reply_to: 'help@acme.test' });
  const cleared = await cli('communities', 'mail', communityId, '--reply-to', '');
  expect(cleared.code).toBe(0);
  expect(await mailOf(communityId)).toEqual({ mail_sender_name: 'Acme Club', mail_reply_to: null });
  expect((await cli('communities', 'mail', 'com_00000000000000000000000000', '--sender-name', 'X')).code).toBe(2);
});
