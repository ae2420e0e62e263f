// The PostGraphile 5 preset of /graphql: the billing_graphql schema only (SQL views in
// db/migrations/fixtures/functions/95-graphql.sql), read-only, connections with keyset cursors,
// run as billing_api with the caller's community and scopes in pgSettings, so the
// same RLS policies (and the views' scope filters) fence it.
import 'postgraphile';
import type pg from 'pg';
import { makePgService } from 'postgraphile/adaptors/pg';
import { PostGraphileAmberPreset } from 'postgraphile/presets/amber';
import { isSafeError } from 'postgraphile/grafast';
import { GraphQLError, NoSchemaIntrospectionCustomRule } from 'postgraphile/graphql';
import crypto from 'node:crypto';
import { log } from '../core/log';
import type { Identity } from '../operations/executor';
import { queryLimitsRule } from './graphql-limits';
import { GRAPHIQL_PATH, GRAPHQL_PATH } from './graphql-paths';
import { EnumColumnsPlugin, EnumConditionAsStringPlugin, KeysetPagingPlugin, RelationNamesPlugin, ScopeTagPlugin } from './graphql-schema';

export { GRAPHIQL_PATH, GRAPHQL_PATH };
/**
 * Backstop for what the query limits cannot foresee: no GraphQL statement runs longer.
 * Below the API login's own statement_timeout (15 s, 00-foundation.sql): a GraphQL
 * query is a bounded read, and a slow one must not hold a pool connection as long as
 * a REST write may.
 */
export const GRAPHQL_STATEMENT_TIMEOUT_MS = 3000;

/** The transaction-local settings of one request: the same ones billing.gate_open sets for REST. */
export function pgSettingsFor(identity: Identity): Record<string, string> {
  return {
    role: 'billing_api',
    'app.community_id': identity.communityId,
    'app.key_id': identity.keyId,
    'app.scopes': identity.scopes.join(' '),
    statement_timeout: String(GRAPHQL_STATEMENT_TIMEOUT_MS),
  };
}

function limitsPlugin(introspection: boolean): GraphileConfig.Plugin {
  return {
    name: 'BillingQueryLimitsPlugin',
    version: '1.0.0',
    grafserv: {
      middleware: {
        setPreset(next, event) {
          // The route (index.ts) has refused what these refuse, with the request's
          // variables; here they are a backstop inside grafserv's validation.
          event.validationRules.push(queryLimitsRule);
          if (!introspection) event.validationRules.push(NoSchemaIntrospectionCustomRule);
          return next();
        },
      },
    },
  };
}

// Names as REST shows them: `id` stays `id` (no Relay node ids, so no `rowId`), and a
// table's connection is its plural (`subscriptions`, not `allSubscriptions`).
const NamingPlugin: GraphileConfig.Plugin = {
  name: 'BillingNamingPlugin',
  version: '1.0.0',
  inflection: {
    replace: {
      _attributeName(_previous, _options, { attributeName, codec }) {
        const attribute = codec.attributes[attributeName];
        return this.coerceToGraphQLName(attribute.extensions?.tags?.name || attributeName);
      },
      _allRows(_previous, _options, resource) {
        return this.camelCase(this.pluralize(this._singularizedResourceName(resource)));
      },
    },
  },
};

/**
 * What a GraphQL client is told of an error: a GraphQL error (a bad field, a null where
 * none may be) or an error grafast marks safe as it is; anything else, a database or
 * programming error whose message may hold a member's data, as an id only, with the
 * error itself in the service's log (a JSON line, the request's error id). grafserv's
 * own masking printed the error and its stack to the console, outside the log.
 */
export function maskGraphqlError(error: GraphQLError): GraphQLError {
  const original = error.originalError;
  if (!original || original instanceof GraphQLError) return error;
  const options = { nodes: error.nodes, source: error.source, positions: error.positions, path: error.path, originalError: original };
  if (isSafeError(original)) return new GraphQLError(original.message, { ...options, extensions: original.extensions ?? null });
  const errorId = crypto.randomUUID();
  log.error({ component: 'graphql', error_id: errorId, path: error.path, err: original }, 'masked GraphQL error');
  return new GraphQLError(`An error occurred (logged with id '${errorId}').`, { ...options, extensions: { errorId } });
}

export function graphqlPreset(opts: { pool: pg.Pool; graphiql: boolean; introspection: boolean; identityOf: (req: unknown) => Identity | undefined }): GraphileConfig.Preset {
  return {
    extends: [PostGraphileAmberPreset],
    plugins: [limitsPlugin(opts.introspection), NamingPlugin, ScopeTagPlugin, EnumColumnsPlugin, EnumConditionAsStringPlugin, KeysetPagingPlugin, RelationNamesPlugin],
    // No Relay node interface (ids are the API's own) and no root Subscription type (its
    // name is the subscriptions view's type; GraphQL here is queries only).
    disablePlugins: ['NodePlugin', 'SubscriptionPlugin'],
    // Read-only: no create/update/delete anywhere (the views' smart tags say it too).
    // Connections only (keyset cursors over the primary key and orderBy), no plain lists.
    schema: { defaultBehavior: '-insert -update -delete -list +connection' },
    pgServices: [makePgService({ pool: opts.pool, schemas: ['billing_graphql'], pubsub: false })],
    grafserv: {
      graphqlPath: GRAPHQL_PATH,
      graphiql: opts.graphiql,
      graphiqlPath: GRAPHIQL_PATH,
      graphiqlOnGraphQLGET: false,
      graphqlOverGET: false,
      websockets: false,
      watch: false,
      maxRequestLength: 100_000,
      maskError: maskGraphqlError,
    },
    grafast: {
      explain: false,
      context(requestContext) {
        const req = requestContext.expressv4?.req ?? requestContext.node?.req;
        const identity = opts.identityOf(req);
        // The route authenticates before grafserv runs: no identity means no request got here unauthenticated.
        if (!identity) throw new Error('GraphQL request without an authenticated caller');
        return { pgSettings: pgSettingsFor(identity) };
      },
    },
  };
}
