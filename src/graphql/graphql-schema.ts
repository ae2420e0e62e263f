// Plugins that make the GraphQL schema say what the API does (docs/decisions/graphql-schema-truth.md):
//   - each view's type carries its @scope (graphql-limits.ts refuses a query needing a
//     scope the key lacks, naming it);
//   - a status column tagged @enumValues is a GraphQL enum of exactly those values
//     (spelt as in SQL and REST, so the JSON a client reads is unchanged; a condition
//     on it still takes the String it took before);
//   - connections page by keyset only: no `offset` argument, and a missing or null
//     `first`/`last` reads DEFAULT_PAGE rows, never the whole set;
//   - relations have readable names (`member`, `plan`, `subscriptions`) beside the
//     generated `memberByMemberId`..., which stay, deprecated.
// Column nullability needs no plugin: the views' @notNull tags (95-graphql.sql).
import 'postgraphile';
import { enumCodec } from 'postgraphile/@dataplan/pg';
import { lambda } from 'postgraphile/grafast';
import { sql } from 'postgraphile/pg-sql2';
import { DEFAULT_PAGE, MAX_PAGE } from './graphql-limits';

const words = (tag: unknown): string[] | null =>
  typeof tag === 'string' && tag.trim() !== '' ? tag.trim().split(/[\s,]+/) : null;

export const ScopeTagPlugin: GraphileConfig.Plugin = {
  name: 'BillingScopeTagPlugin',
  version: '1.0.0',
  schema: {
    hooks: {
      GraphQLObjectType(spec, _build, context) {
        const scope = context.scope.pgCodec?.extensions?.tags?.scope;
        if (!context.scope.isPgClassType || typeof scope !== 'string') return spec;
        return { ...spec, extensions: { ...spec.extensions, billingScope: scope } };
      },
    },
  },
};

export const EnumColumnsPlugin: GraphileConfig.Plugin = {
  name: 'BillingEnumColumnsPlugin',
  version: '1.0.0',
  gather: {
    hooks: {
      pgCodecs_attribute(info, event) {
        const values = words(event.attribute.extensions?.tags?.enumValues);
        if (!values) return;
        // subscriptions.status: the enum SubscriptionStatus (a text column: no cast needed).
        const name = `${info.inflection.singularize(event.pgClass.relname)}_${event.pgAttribute.attname}`;
        event.attribute.codec = enumCodec({
          name,
          identifier: sql`text`,
          values,
          description: `The values of ${event.pgClass.relname}.${event.pgAttribute.attname}.`,
          extensions: { tags: {} },
        });
      },
    },
  },
};

/**
 * A condition on such a column keeps taking a String, as before the enums: a client's
 * `condition: { status: "active" }` literal still runs (the schema changes additively;
 * an unknown value matches nothing, as it did).
 */
export const EnumConditionAsStringPlugin: GraphileConfig.Plugin = {
  name: 'BillingEnumConditionAsStringPlugin',
  version: '1.0.0',
  schema: {
    hooks: {
      GraphQLInputObjectType_fields_field(field, build, context) {
        const attribute = context.scope.pgAttribute as { extensions?: { tags?: Record<string, unknown> } } | undefined;
        if (!context.scope.isPgConnectionConditionInputField || !words(attribute?.extensions?.tags?.enumValues)) return field;
        return { ...field, type: build.graphql.GraphQLString };
      },
    },
  },
};

type PlanFn = (...args: unknown[]) => unknown;
interface ConnectionLike { setFirst(step: unknown): void; setLast(step: unknown): void }
interface FieldArgsLike { getRaw(name: string): unknown }

const pageOf = lambda as unknown as <T>(deps: unknown, fn: (v: T) => number | null, isSyncAndSafe: boolean) => unknown;
const clamp = (n: unknown) => (typeof n === 'number' ? Math.min(n, MAX_PAGE) : null);

export const KeysetPagingPlugin: GraphileConfig.Plugin = {
  name: 'BillingKeysetPagingPlugin',
  version: '1.0.0',
  after: ['PgFirstLastBeforeAfterArgsPlugin'],
  schema: {
    hooks: {
      GraphQLObjectType_fields_field_args(args, _build, context) {
        if (!context.scope.isPgFieldConnection) return args;
        // offset reads (and discards) every row it skips: keyset cursors only. first and
        // last are applied by the field's plan below, together.
        const { offset: _offset, ...rest } = args;
        for (const name of ['first', 'last'] as const) {
          if (rest[name]) rest[name] = { ...rest[name], applyPlan: undefined, description: `${rest[name].description ?? ''} At most ${MAX_PAGE}; ${DEFAULT_PAGE} when neither first nor last is given (or both are null).`.trim() };
        }
        return rest;
      },
      GraphQLObjectType_fields_field(field, _build, context) {
        if (!context.scope.isPgFieldConnection || typeof field.plan !== 'function') return field;
        const plan = field.plan as unknown as PlanFn;
        const paged: PlanFn = (...a) => {
          const $connection = plan(...a) as Partial<ConnectionLike> | null;
          const fieldArgs = a[1] as FieldArgsLike;
          if ($connection && typeof $connection.setFirst === 'function' && typeof $connection.setLast === 'function') {
            const $first = fieldArgs.getRaw('first');
            const $last = fieldArgs.getRaw('last');
            $connection.setFirst(pageOf<[unknown, unknown]>([$first, $last], ([f, l]) => (f == null && l == null ? DEFAULT_PAGE : clamp(f)), true));
            $connection.setLast(pageOf<unknown>($last, clamp, true));
          }
          return $connection;
        };
        return { ...field, plan: paged as unknown as typeof field.plan };
      },
    },
  },
};

/** Relation fields per type, recorded as PgRelationsPlugin adds them. */
const relationFields = new WeakMap<object, Map<string, 'single' | 'many'>>();

/** `memberByMemberId` → `member`; `subscriptionsByMemberId` → `subscriptions`; null when the name is not of that form. */
export function readableRelationName(name: string, kind: 'single' | 'many'): string | null {
  const m = /^(.+)By([A-Z][A-Za-z0-9]*)$/.exec(name);
  if (!m) return null;
  if (kind === 'many') return m[1];
  if (!m[2].endsWith('Id') || m[2] === 'Id' || m[2].includes('And')) return null;
  const base = m[2].slice(0, -2);
  return base[0].toLowerCase() + base.slice(1);
}

export const RelationNamesPlugin: GraphileConfig.Plugin = {
  name: 'BillingRelationNamesPlugin',
  version: '1.0.0',
  after: ['PgRelationsPlugin'],
  schema: {
    hooks: {
      GraphQLObjectType_fields_field(field, _build, context) {
        const kind = context.scope.isPgSingleRelationField ? 'single' : context.scope.isPgManyRelationConnectionField ? 'many' : null;
        if (kind) {
          const map = relationFields.get(context.Self) ?? new Map();
          map.set(context.scope.fieldName, kind);
          relationFields.set(context.Self, map);
        }
        return field;
      },
      GraphQLObjectType_fields(fields, _build, context) {
        const relations = relationFields.get(context.Self);
        if (!relations) return fields;
        const wanted = new Map<string, string[]>();
        for (const [old, kind] of relations) {
          const name = readableRelationName(old, kind);
          if (name && name !== old && fields[old]) wanted.set(name, [...(wanted.get(name) ?? []), old]);
        }
        const out = { ...fields };
        for (const [name, olds] of wanted) {
          if (olds.length !== 1 || out[name]) continue; // two relations would share the name, or it is taken
          const old = olds[0];
          out[name] = { ...fields[old] };
          out[old] = { ...fields[old], deprecationReason: `Use ${name}.` };
        }
        return out;
      },
    },
  },
};
