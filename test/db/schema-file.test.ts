// db/schema.sql is the schema pg_dump prints after every migration; its first line
// carries the hash of db/migrations/ it was dumped from. A migration or fixture edited
// without `npm run db:schema` leaves a stale file: this test fails until it is rerun.
import fs from 'node:fs';
import { HASH_PREFIX, headerLine, schemaFile } from '../../scripts/dump-schema';

test('db/schema.sql was regenerated after the last change under db/migrations/', () => {
  const first = fs.readFileSync(schemaFile, 'utf8').split('\n', 1)[0];
  expect(first.startsWith(HASH_PREFIX)).toBe(true);
  expect(first).toBe(headerLine());
});

test('db/schema.sql holds the dumped schema, policies and grants included', () => {
  const text = fs.readFileSync(schemaFile, 'utf8');
  expect(text).toContain('CREATE TABLE billing.subscriptions');
  expect(text).toContain('CREATE POLICY tenant ON billing.subscriptions');
  expect(text).toMatch(/GRANT SELECT ON TABLE billing\.subscriptions TO billing_api;/);
  expect(text).toMatch(/GRANT SELECT,UPDATE ON TABLE billing\.subscriptions TO billing_writer;/);
  expect(text).not.toContain('graphile_worker.jobs');
});
