// SQL error messages become the problem's detail wherever the call came from (API, CLI,
// worker), so they speak of the value, never of one adapter's flag.
import pg from 'pg';
import { createTenant, TEST_DB } from '../support/app';
import { createOwnerPool } from '../../src/db/pool';
import { fixtureFiles, readFixture } from '../support/fixtures';

test('no message raised in db/migrations/fixtures names a CLI flag', () => {
  const files = fixtureFiles();
  expect(files.length).toBeGreaterThan(20);
  for (const file of files) {
    const text = readFixture(file);
    expect([file, text.match(/(raise\([^)]*|message\s*=\s*)'--[a-z]/g)]).toEqual([file, null]);
  }
});

test('the test clock refuses a non-positive number of days in plain words', async () => {
  const owner: pg.Pool = createOwnerPool(TEST_DB());
  try {
    const t = await createTenant(owner);
    await expect(owner.query('select billing.sandbox_advance($1, 0)', [t.communityId]))
      .rejects.toMatchObject({ code: 'BL422', message: 'The number of days must be positive.', detail: 'days' });
  } finally {
    await owner.end();
  }
});
