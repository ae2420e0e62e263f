import fs from 'node:fs';
import pg from 'pg';
import { withDatabase } from '../../src/db/migrate';

export default async function globalTeardown() {
  await (globalThis as { __pooler?: { stop(): Promise<void> } }).__pooler?.stop();
  const runDb = (globalThis as { __runDb?: string }).__runDb;
  const server = process.env.BILLING_TEST_SERVER;
  if (runDb && server) {
    const admin = new pg.Client({ connectionString: withDatabase(server, 'postgres') });
    await admin.connect();
    await admin.query(`drop database if exists ${runDb} with (force)`).catch(() => {});
    await admin.end();
  }
  const embedded = (globalThis as { __embedded?: { db: { stop(): Promise<void> }; dir: string } }).__embedded;
  if (embedded) {
    await embedded.db.stop();
    fs.rmSync(embedded.dir, { recursive: true, force: true });
  }
}
