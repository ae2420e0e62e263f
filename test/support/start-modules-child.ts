// What a start of the service loads, for test/main/start-modules.test.ts: the modules
// src/main.ts loads (its own, then the app, the worker and the demo's) and the app
// built as main builds it, with pools that never connect. Prints the npm packages then
// in the module cache, as a JSON array.
import pg from 'pg';
import '../../src/db/database';
import '../../src/db/migration-status';
import '../../src/db/logins';
import '../../src/db/pool';
import '../../src/db/server-url';
import { createApp } from '../../src/app';
import '../../src/graphql/graphql-paths';
import '../../worker';
import '../../src/domain/catalog/catalog-file';
import '../../src/domain/communities/community-admin';
import '../../src/domain/operators/operator-accounts';
import { loadConfig } from '../../src/core/config';

const pool = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:9/none' });
createApp({ config: loadConfig({ NODE_ENV: 'test' }), apiPool: pool, ownerPool: pool });
const packages = new Set<string>();
for (const file of Object.keys(require.cache)) {
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file);
  if (m) packages.add(m[1]);
}
process.stdout.write(`${JSON.stringify([...packages].sort())}\n`);
process.exit(0);
