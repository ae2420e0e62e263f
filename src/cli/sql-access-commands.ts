// billing sql-access grant --community ID
// billing sql-access revoke --community ID
// billing sql-access list
import { grantSqlAccess, GrantedSqlAccess, listSqlAccess, OPERATOR_CONNECTION_LIMIT, OPERATOR_STATEMENT_TIMEOUT, revokeSqlAccess, SqlAccess } from '../domain/communities/sql-access';
import { defineCommand, defineGroup, requireString } from './command';

const community = { type: 'string', required: true, value: 'ID', description: 'community id' } as const;

export default defineGroup({
  name: 'sql-access',
  summary: 'direct read-only SQL for a community (analytics, BI tools)',
  commands: [
    defineCommand({
      name: 'grant',
      summary: 'creates a PostgreSQL login that reads one community; its connection string is shown once',
      options: {
        community,
        'allow-shared-statistics': { type: 'boolean', description: 'create the login although the catalog still shows every community\'s table statistics (the fence needs a superuser once)' },
      },
      async run(ctx, input) {
        return grantSqlAccess(await ctx.ownerPool(), await ctx.databaseUrl(), requireString(input, 'community'),
          { allowSharedStatistics: input.options['allow-shared-statistics'] === true });
      },
      print: (r: GrantedSqlAccess) => [
        `Created SQL login ${r.role} for community ${r.community_id} (read-only; statement_timeout ${OPERATOR_STATEMENT_TIMEOUT}, ${OPERATOR_CONNECTION_LIMIT} connections).`,
        '', `  ${r.connection_string}`, '', 'Store it now: the password is not shown again. See docs/analytics.md.',
      ].join('\n'),
    }),
    defineCommand({
      name: 'revoke',
      summary: 'drops the community\'s SQL logins and ends their sessions',
      options: { community },
      async run(ctx, input) {
        return revokeSqlAccess(await ctx.ownerPool(), requireString(input, 'community'));
      },
      print: (r: { community_id: string; revoked: string[] }) =>
        r.revoked.length ? `Revoked ${r.revoked.join(', ')} of community ${r.community_id}` : `Community ${r.community_id} had no SQL login`,
    }),
    defineCommand({
      name: 'list',
      summary: 'lists the SQL logins of every community',
      async run(ctx) {
        return listSqlAccess(await ctx.ownerPool());
      },
      print: (r: { data: SqlAccess[] }) =>
        r.data.length ? r.data.map((a) => `${a.community_id}  ${a.role}  ${a.created_at}`).join('\n') : 'No SQL logins.',
    }),
  ],
});
