// How much one GraphQL query may ask of the server, decided before anything runs.
//
// analyzeDocument walks a parsed document once, with the request's variables: every
// field counts (aliases and single-row lookups included, not only connections), each
// named fragment is summarised once however often it is spread (so a chain of
// fragments spreading each other twice costs linear time, and its expanded size is
// still counted), and it answers
//   - the limits the query breaks: depth, aliases, field selections, page sizes, rows;
//   - its cost: the rows it may read, and the rate tokens it pays (tokensFor);
//   - the scopes it needs (the views' @scope tags), so a key lacking one gets an
//     error naming it instead of the empty answer the view's filter would give;
//   - whether it introspects the schema.
// The GraphQL route (index.ts) runs it on every request before grafserv parses and
// validates the document (graphql-js's own validation is quadratic in repeated
// fields: it must not see a document our limits refuse). queryLimitsRule runs the
// variable-independent part again inside grafserv's validation, as a backstop.
// The database adds a statement timeout (graphql-preset.ts).
import {
  DocumentNode, FieldNode, FragmentDefinitionNode, getNamedType, GraphQLError, GraphQLNamedType, GraphQLSchema,
  isInterfaceType, isObjectType, Kind, OperationDefinitionNode, SelectionSetNode, ValidationContext, ValidationRule,
  ValueNode,
} from 'postgraphile/graphql';

export const MAX_DEPTH = 10;
export const MAX_PAGE = 100;
/** The page a connection reads when first and last are both missing or null (REST's default limit). */
export const DEFAULT_PAGE = 25;
/** Estimated rows at most: the page sizes of nested connections multiply. */
export const MAX_NODES = 25_000;
/** Aliased fields per document (each aliased root field is one more SQL statement). */
export const MAX_ALIASES = 20;
/** Field selections per operation, fragments expanded. */
export const MAX_FIELDS = 500;
/** Lexical tokens per document: parsing stops there (graphql-js parse maxTokens). */
export const MAX_TOKENS = 5_000;
/** What a totalCount may read: a count over the whole community, at least a full page. */
export const COUNT_COST = MAX_PAGE;
/** Rows one rate token pays for: one REST page. */
export const ROWS_PER_TOKEN = 100;

export type LimitCode = 'QUERY_TOO_DEEP' | 'QUERY_TOO_COSTLY' | 'QUERY_TOO_LARGE';

export interface QueryAnalysis {
  /** Estimated rows read by the costliest operation. */
  rows: number;
  /** Root fields (SQL statements) of the costliest operation. */
  rootFields: number;
  /** Scopes the document's fields need, with the first field that needs each. */
  scopes: Map<string, FieldNode>;
  /** The first __schema or __type field, if any. */
  introspection: FieldNode | null;
  errors: GraphQLError[];
}

interface Summary {
  rows: number;
  fields: number;
  aliases: number;
  depth: number;
  scopes: Map<string, FieldNode>;
  introspection: FieldNode | null;
}

const empty = (): Summary => ({ rows: 0, fields: 0, aliases: 0, depth: 0, scopes: new Map(), introspection: null });

function add(into: Summary, from: Summary, times = 1, depthOffset = 0) {
  into.rows += times * from.rows;
  into.fields += from.fields;
  into.aliases += from.aliases;
  into.depth = Math.max(into.depth, from.depth + depthOffset);
  for (const [scope, node] of from.scopes) if (!into.scopes.has(scope)) into.scopes.set(scope, node);
  into.introspection ??= from.introspection;
}

const isConnectionType = (type: GraphQLNamedType | null) => !!type && type.name.endsWith('Connection');
const isEdgeType = (type: GraphQLNamedType | null) => !!type && type.name.endsWith('Edge');

/** The scope a type's rows need (graphql-preset.ts copies the views' @scope tags); a connection's is its nodes'. */
export function scopeOf(type: GraphQLNamedType | null): string | null {
  if (!type || !isObjectType(type)) return null;
  const own = (type.extensions as { billingScope?: unknown } | undefined)?.billingScope;
  if (typeof own === 'string') return own;
  if (isConnectionType(type)) {
    const nodes = type.getFields().nodes;
    return nodes ? scopeOf(getNamedType(nodes.type)) : null;
  }
  return null;
}

interface Walk {
  schema: GraphQLSchema;
  fragments: Record<string, FragmentDefinitionNode>;
  /** The request's variables; undefined when validating without them (page variables count as MAX_PAGE). */
  variables: Record<string, unknown> | undefined;
  defaults: Record<string, ValueNode>;
  memo: Map<string, Summary | 'busy'>;
  errors: { message: string; code: LimitCode; node: FieldNode | OperationDefinitionNode }[];
}

/** The rows a connection field reads: first or last (the larger), DEFAULT_PAGE when both are missing or null. */
function pageSize(field: FieldNode, walk: Walk): number {
  let size: number | null = null;
  for (const arg of field.arguments ?? []) {
    if (arg.name.value !== 'first' && arg.name.value !== 'last') continue;
    let value: unknown;
    let node: ValueNode | undefined = arg.value;
    if (node.kind === Kind.VARIABLE) {
      const name = node.name.value;
      if (walk.variables === undefined) { size = Math.max(size ?? 0, MAX_PAGE); continue; }
      if (Object.prototype.hasOwnProperty.call(walk.variables, name)) {
        value = walk.variables[name];
        node = undefined;
      } else {
        node = walk.defaults[name];
        if (!node) continue; // missing, no default: null
      }
    }
    if (node) {
      if (node.kind === Kind.NULL) continue;
      value = node.kind === Kind.INT ? Number(node.value) : NaN;
    }
    if (value === null || value === undefined) continue;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_PAGE) {
      const shown = typeof value === 'number' ? String(value) : JSON.stringify(value)?.slice(0, 20);
      walk.errors.push({ message: `${field.name.value}: ${arg.name.value} is ${shown}; a page size is a number from 0 to ${MAX_PAGE}.`, code: 'QUERY_TOO_COSTLY', node: field });
      size = Math.max(size ?? 0, MAX_PAGE);
      continue;
    }
    size = Math.max(size ?? 0, value);
  }
  return size ?? DEFAULT_PAGE;
}

function summarise(set: SelectionSetNode, parent: GraphQLNamedType | null, walk: Walk): Summary {
  const out = empty();
  for (const sel of set.selections) {
    if (sel.kind === Kind.FRAGMENT_SPREAD) {
      const name = sel.name.value;
      const frag = walk.fragments[name];
      if (!frag) continue;
      let summary = walk.memo.get(name);
      if (summary === 'busy') continue; // a cycle: graphql-js refuses the document
      if (!summary) {
        walk.memo.set(name, 'busy');
        summary = summarise(frag.selectionSet, walk.schema.getType(frag.typeCondition.name.value) ?? parent, walk);
        walk.memo.set(name, summary);
      }
      add(out, summary);
    } else if (sel.kind === Kind.INLINE_FRAGMENT) {
      const type = sel.typeCondition ? walk.schema.getType(sel.typeCondition.name.value) ?? parent : parent;
      add(out, summarise(sel.selectionSet, type, walk));
    } else {
      out.fields += 1;
      if (sel.alias && sel.alias.value !== sel.name.value) out.aliases += 1;
      const name = sel.name.value;
      if (name.startsWith('__')) {
        // The schema itself: no database work, no depth limit (the introspection query
        // nests ofType deeply); its fields and aliases still count.
        if (name === '__schema' || name === '__type') out.introspection ??= sel;
        if (sel.selectionSet) {
          const inner = summarise(sel.selectionSet, null, { ...walk, memo: new Map() });
          out.fields += inner.fields;
          out.aliases += inner.aliases;
          out.introspection ??= inner.introspection;
        }
        continue;
      }
      const def = parent && (isObjectType(parent) || isInterfaceType(parent)) ? parent.getFields()[name] : undefined;
      const type = def ? getNamedType(def.type) : null;
      const scope = scopeOf(type);
      if (scope && !out.scopes.has(scope)) out.scopes.set(scope, sel);
      let own = 0;
      let times = 1;
      if (isConnectionType(type)) {
        own = times = pageSize(sel, walk);
      } else if (name === 'totalCount' && isConnectionType(parent)) {
        own = COUNT_COST;
      } else if (scope && !isConnectionType(parent) && !isEdgeType(parent)) {
        own = 1; // a lookup or a relation: one row per parent row
      }
      out.rows += own;
      out.depth = Math.max(out.depth, 1);
      if (sel.selectionSet) add(out, summarise(sel.selectionSet, type, walk), times, 1);
    }
  }
  return out;
}

function rootOf(schema: GraphQLSchema, op: OperationDefinitionNode) {
  return op.operation === 'query' ? schema.getQueryType() : op.operation === 'mutation' ? schema.getMutationType() : schema.getSubscriptionType();
}

/** Walks every operation of the document; variables undefined: validation without a request. */
export function analyzeDocument(schema: GraphQLSchema, document: DocumentNode, variables?: Record<string, unknown> | null): QueryAnalysis {
  const fragments: Record<string, FragmentDefinitionNode> = {};
  for (const def of document.definitions) if (def.kind === Kind.FRAGMENT_DEFINITION) fragments[def.name.value] = def;
  const result: QueryAnalysis = { rows: 0, rootFields: 0, scopes: new Map(), introspection: null, errors: [] };
  const errors: Walk['errors'] = [];
  for (const op of document.definitions) {
    if (op.kind !== Kind.OPERATION_DEFINITION) continue;
    const root = rootOf(schema, op);
    if (!root) {
      // graphql-js 16 leaves this to execution; refuse it here, with a plain answer.
      result.errors.push(new GraphQLError(`This API is read-only: it has no ${op.operation}s.`, { nodes: op }));
      continue;
    }
    const defaults: Record<string, ValueNode> = {};
    for (const v of op.variableDefinitions ?? []) if (v.defaultValue) defaults[v.variable.name.value] = v.defaultValue;
    const walk: Walk = { schema, fragments, variables: variables === null ? {} : variables, defaults, memo: new Map(), errors };
    const s = summarise(op.selectionSet, root, walk);
    const report = (message: string, code: LimitCode) => errors.push({ message, code, node: op });
    if (s.depth > MAX_DEPTH) report(`The query is ${s.depth} levels deep; at most ${MAX_DEPTH} are allowed.`, 'QUERY_TOO_DEEP');
    if (s.aliases > MAX_ALIASES) report(`The query has ${fmt(s.aliases)} aliases; at most ${MAX_ALIASES} are allowed: read lists through a connection.`, 'QUERY_TOO_LARGE');
    if (s.fields > MAX_FIELDS) report(`The query selects ${fmt(s.fields)} fields (fragments expanded); at most ${MAX_FIELDS} are allowed.`, 'QUERY_TOO_LARGE');
    // Rows depend on the variables' page sizes: checked with the request's (the route),
    // not by the validation backstop, which would count every variable page as 100.
    if (s.rows > MAX_NODES && variables !== undefined) report(`The query may read ${fmt(s.rows)} rows; at most ${MAX_NODES} are allowed: ask for smaller pages.`, 'QUERY_TOO_COSTLY');
    const rootFields = countRootFields(op.selectionSet, fragments, new Set());
    if (s.rows >= result.rows) { result.rows = s.rows; result.rootFields = Math.max(result.rootFields, rootFields); }
    for (const [scope, node] of s.scopes) if (!result.scopes.has(scope)) result.scopes.set(scope, node);
    result.introspection ??= s.introspection;
  }
  for (const e of errors) result.errors.push(new GraphQLError(e.message, { nodes: e.node, extensions: { code: e.code } }));
  return result;
}

const fmt = (n: number) => (Number.isFinite(n) && n < 1e15 ? n.toLocaleString('en-US') : 'too many');

/** Root fields that read the database (not __typename or introspection), fragments expanded once each. */
function countRootFields(set: SelectionSetNode, fragments: Record<string, FragmentDefinitionNode>, seen: Set<string>): number {
  let n = 0;
  for (const sel of set.selections) {
    if (sel.kind === Kind.FIELD) { if (!sel.name.value.startsWith('__')) n += 1; }
    else if (sel.kind === Kind.INLINE_FRAGMENT) n += countRootFields(sel.selectionSet, fragments, seen);
    else if (!seen.has(sel.name.value) && fragments[sel.name.value]) {
      seen.add(sel.name.value);
      n += countRootFields(fragments[sel.name.value].selectionSet, fragments, seen);
    }
  }
  return n;
}

/**
 * The rate tokens a query pays: what the REST requests reading the same rows would,
 * one per root field (each is a statement) and one per ROWS_PER_TOKEN rows, whichever
 * is more; at least one, at most the key's burst (every query within the limits can
 * run on a full bucket).
 */
export function tokensFor(analysis: Pick<QueryAnalysis, 'rows' | 'rootFields'>, burst: number): number {
  const tokens = Math.max(1, analysis.rootFields, Math.ceil(analysis.rows / ROWS_PER_TOKEN));
  return Math.max(1, Math.min(tokens, Math.floor(burst)));
}

/**
 * The same limits inside grafserv's validation (a backstop: the route has refused
 * such documents already), except the row budget, which needs the variables.
 */
export const queryLimitsRule: ValidationRule = (context: ValidationContext) => {
  let done = false;
  return {
    Document(doc) {
      if (done) return false;
      done = true;
      for (const error of analyzeDocument(context.getSchema(), doc, undefined).errors) context.reportError(error);
      return false;
    },
  };
};
