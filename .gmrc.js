// graphile-migrate settings for developers (`npx graphile-migrate commit`, `watch`,
// `uncommit`). The service itself applies migrations through src/db/migrate.ts.
//   DATABASE_URL          the development database
//   SHADOW_DATABASE_URL   a scratch database graphile-migrate may drop and recreate
//   ROOT_DATABASE_URL     a superuser connection to the same server (e.g. .../template1)
// The shadow database gets graphile-worker's schema first: our migrations enqueue jobs.
const installWorkerSchema =
  'node -e "require(\'graphile-worker\').runMigrations({ connectionString: process.env.GM_DBURL })' +
  '.then(() => process.exit(0), (e) => { console.error(e); process.exit(1); })"';

module.exports = {
  connectionString: process.env.DATABASE_URL,
  shadowConnectionString: process.env.SHADOW_DATABASE_URL,
  rootConnectionString: process.env.ROOT_DATABASE_URL,
  migrationsFolder: './db/migrations',
  afterReset: [{ _: 'command', command: installWorkerSchema }],
};
