// `billing communities set-legal` (docs/decisions/invoice-pdf.md): the seller's legal
// name, address, country and tax id that invoice PDFs print; a value left out is kept,
// an empty one cleared, and what the table refuses is refused.
import pg from 'pg';
import { createCommunity } from '../../src/domain/communities/community-admin';
import { createOwnerPool } from '../../src/db/pool';
import { TEST_DB } from '../support/app';
import { cli } from '../support/cli';

let owner: pg.Pool;
let community: string;

beforeAll(async () => {
  process.env.DATABASE_URL = TEST_DB();
  owner = createOwnerPool(TEST_DB());
  community = (await createCommunity(owner, 'Legal fields')).id;
});
afterAll(() => owner.end());

const legal = async () => (await owner.query(
  'select legal_name, address_lines, country, tax_id from billing.communities where id = $1', [community])).rows[0];

test('set-legal sets the fields given, keeps the others and clears an empty one', async () => {
  const set = await cli('communities', 'set-legal', '--community', community, '--legal-name', 'Legal Fields GmbH',
    '--address', 'Hauptstrasse 1 | 10115 Berlin', '--country', 'de', '--tax-id', 'DE123456789', '--json');
  expect(set.code).toBe(0);
  expect(JSON.parse(set.out)).toEqual({ id: community, legal_name: 'Legal Fields GmbH', address_lines: ['Hauptstrasse 1', '10115 Berlin'], country: 'DE', tax_id: 'DE123456789' });
  const some = await cli('communities', 'set-legal', '--community', community, '--tax-id', '');
  expect(some.code).toBe(0);
  expect(some.out).toContain('Legal Fields GmbH');
  expect(await legal()).toEqual({ legal_name: 'Legal Fields GmbH', address_lines: ['Hauptstrasse 1', '10115 Berlin'], country: 'DE', tax_id: null });
});

test('set-legal refuses a country that is not two letters, nothing to set, and more than six address lines', async () => {
  const before = await legal();
  expect((await cli('communities', 'set-legal', '--community', community, '--country', 'Germany')).code).toBe(2);
  expect((await cli('communities', 'set-legal', '--community', community)).code).toBe(2);
  const lines = await cli('communities', 'set-legal', '--community', community, '--address', '1|2|3|4|5|6|7');
  expect(lines.code).not.toBe(0);
  expect(lines.err).toMatch(/communities_legal_valid/);
  expect(await legal()).toEqual(before);
});
