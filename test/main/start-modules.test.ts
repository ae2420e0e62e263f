// A restart is ready sooner when it loads only what it needs before it is ready
// (docs/decisions/restart-under-3-s.md): PostGraphile, the MCP SDK, Stripe and zxcvbn
// load with the first request that uses them, and the platforms' clients with the first
// benefit delivery, not when the service starts.
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
const TSX = path.join(ROOT, 'node_modules/.bin/tsx');
/** Loaded when first used (graphql-engine.ts, mcp-engine.ts, stripeSdk(), passwordStrength()). */
const ON_FIRST_USE = ['postgraphile', 'grafast', 'graphql', '@modelcontextprotocol/server', 'stripe', '@zxcvbn-ts/core',
  '@zxcvbn-ts/language-common', '@zxcvbn-ts/language-en', '@discordjs/rest', 'grammy'];

test('a start of the service loads neither PostGraphile, the MCP SDK, Stripe, zxcvbn nor the platforms\' clients', () => {
  const child = spawnSync(TSX, [path.join(ROOT, 'test/support/start-modules-child.ts')], {
    cwd: ROOT, encoding: 'utf8', env: { ...process.env, LOG_LEVEL: 'warn' },
  });
  expect(child.stderr).toBe('');
  expect(child.status).toBe(0);
  const loaded = JSON.parse(child.stdout) as string[];
  // It did load the service: express, the operations' zod, graphile-worker.
  expect(loaded).toEqual(expect.arrayContaining(['express', 'zod', 'graphile-worker']));
  expect(loaded.filter((name) => ON_FIRST_USE.includes(name))).toEqual([]);
});
