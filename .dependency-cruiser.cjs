// Import rules of docs/development.md ("Layout"): imports point one way,
//   core <- db, webhooks (infrastructure) <- domain <- operations <- web
//   <- adapters (http, mcp, graphql, cli, providers, linking, worker tasks) <- composition roots
// (src/app.ts, src/main.ts, worker/index.ts). Adapters never import each other.
// src/platforms/ (the platforms' clients) builds on core alone, beside infrastructure.
// Run by `npm test` and `npm run deps`.
const CORE = '^src/core/';
const DB = '^src/db/';
const INFRA = '^src/webhooks/';
const DOMAIN = '^src/domain/';
const OPERATIONS = '^src/operations/';
const WEB = '^src/web/';
const HTTP = '^src/http/';
const MCP = '^src/mcp/';
const GRAPHQL = '^src/graphql/';
const CLI = '^src/cli/';
const PROVIDERS = '^src/providers/';
const DASHBOARD = '^src/dashboard/';
const TASKS = '^worker/tasks/';
const ROOTS = '^(src/(app|main)\\.ts|worker/index\\.ts)$';
const PLATFORMS = '^src/platforms/';
const LINKING = '^src/linking/';
const ADAPTERS = [HTTP, MCP, GRAPHQL, CLI, PROVIDERS, LINKING, DASHBOARD, TASKS];

const layer = (name, from, allowed, comment) => ({
  name,
  comment,
  severity: 'error',
  from: { path: from },
  // Anything in src/ or worker/ outside the allowed layers.
  to: { path: '^(src|worker)/', pathNot: [from, ...allowed] },
});

const adapterIsolation = ADAPTERS.map((adapter) => ({
  name: `adapter-isolation:${adapter}`,
  comment: 'adapters never import each other: what two adapters share belongs in operations, domain, web or core',
  severity: 'error',
  from: { path: adapter },
  to: { path: ADAPTERS.filter((other) => other !== adapter) },
}));

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'a cycle makes two modules one: break it by moving the shared part down a layer',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
    layer('core-imports-nothing', CORE, [], 'core (errors, ids, statuses, api version, cursor, config) imports no other module of the service'),
    layer('db-only-core', DB, [CORE], 'db (pools, transactions, migrations) builds on core only'),
    layer('infrastructure-only-core', INFRA, [CORE], 'webhook signing and sending build on core only'),
    layer('platform-clients-only-core', PLATFORMS, [CORE], 'the platforms\' clients (Discord, Telegram) build on core only'),
    layer('domain-no-upward', DOMAIN, [CORE, DB, INFRA, PLATFORMS], 'the domain (schemas, operations, ports) never imports the registry, adapters, providers or roots'),
    layer('operations-no-upward', OPERATIONS, [CORE, DB, INFRA, PLATFORMS, DOMAIN], 'the registry and executor never import adapters, providers or roots'),
    layer('web-no-upward', WEB, [CORE, OPERATIONS], 'express plumbing shared by the HTTP-mounted adapters'),
    ...adapterIsolation,
    {
      name: 'every-module-in-a-layer',
      comment: 'a module outside the layers above has no place in the import rules: move it into one',
      severity: 'error',
      from: {},
      to: { path: '^(src|worker)/', pathNot: [CORE, DB, INFRA, PLATFORMS, DOMAIN, OPERATIONS, WEB, ...ADAPTERS, ROOTS] },
    },
    {
      name: 'server-roots-not-cli',
      comment: 'the service does not borrow from the operator CLI: what both need lives in db or domain',
      severity: 'error',
      from: { path: '^(src/(app|main)\\.ts|worker/index\\.ts)$' },
      to: { path: CLI },
    },
    {
      name: 'only-roots-import-roots',
      comment: 'composition roots (src/app.ts, src/main.ts, worker/index.ts) are imported by nothing but roots',
      severity: 'error',
      from: { pathNot: ROOTS },
      to: { path: ROOTS },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    includeOnly: '^(src|worker)/',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.json'] },
  },
};
