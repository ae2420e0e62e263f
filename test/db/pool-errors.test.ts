// A database restart cuts the connections of requests in the middle of their
// transaction, between two queries. The client then emits 'error' with no query to
// hand it to; unheard, that event ends the process (the soak saw the API die on a
// database restart). The pools listen, so the request fails and the process lives.
// Run in a child process: the failure being tested would end the test runner.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { TEST_APP_DB, TEST_DB } from '../support/app';

for (const name of ['api', 'owner']) {
  test(`a ${name} pool client cut between two queries of a transaction does not end the process`, () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(__dirname, 'pool-errors-child.ts')], {
      cwd: path.resolve(__dirname, '../..'), encoding: 'utf8', timeout: 30_000,
      env: { ...process.env, CHILD_POOL: name, CHILD_OWNER_URL: TEST_DB(), CHILD_APP_URL: TEST_APP_DB() },
    });
    expect({ status: r.status, stdout: r.stdout.trim(), stderr: r.stderr.split('\n').slice(0, 3).join('\n') })
      .toEqual({ status: 0, stdout: 'alive', stderr: '' });
  }, 40_000);
}
