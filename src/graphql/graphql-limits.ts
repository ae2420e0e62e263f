// How much one GraphQL query may ask of the database: a depth limit and a page-size
// and node-count limit, checked when the document is validated (once per distinct
// document: grafserv caches the result), plus the page sizes given as variables,
// checked per request. The database adds a statement timeout (graphql-preset.ts).
import {
  FieldNode, FragmentDefinitionNode, getNamedType, GraphQLError, GraphQLObjectType, GraphQLSchema,
  Kind, OperationDefinitionNode, SelectionSetNode, ValidationContext, ValidationRule, DocumentNode,
  isObjectType, isInterfaceType,
} from 'postgraphile/graphql';

export const MAX_DEPTH = 10;
export const MAX_PAGE = 100;
/** Estimated rows at most: the page sizes of nested connections multiply. */
export const MAX_NODES = 25_000;

const isConnection = (typeName: string) => typeName.endsWith('Connection');
const isIntrospection = (name: string) => name.startsWith('__');

interface Walk {
  schema: GraphQLSchema;
  fragments: Record<string, FragmentDefinitionNode>;
  report: (message: string, node: FieldNode | OperationDefinitionNode) => void;
  nodes: number;
  maxDepth: number;
}

function pageSize(field: FieldNode, walk: Walk): number | null {
  let size: number | null = null;
  for (const arg of field.arguments ?? []) {
    if (arg.name.value === 'offset') {
      walk.report(`${field.name.value}: page with after/before cursors (keyset), not offset.`, field);
      continue;
    }
    if (arg.name.value !== 'first' && arg.name.value !== 'last') continue;
    if (arg.value.kind === Kind.INT) {
      const n = Number(arg.value.value);
      if (n > MAX_PAGE) walk.report(`${field.name.value}: ${arg.name.value} may be at most ${MAX_PAGE}.`, field);
      size = Math.max(size ?? 0, n);
    } else if (arg.value.kind === Kind.VARIABLE) {
      size = Math.max(size ?? 0, MAX_PAGE); // its value is checked per request (pageVariablesError)
    }
  }
  return size;
}

function walkSelections(set: SelectionSetNode, parent: GraphQLObjectType | null, depth: number, multiplier: number,
  walk: Walk, seen: Set<string>) {
  for (const sel of set.selections) {
    if (sel.kind === Kind.FRAGMENT_SPREAD) {
      const frag = walk.fragments[sel.name.value];
      if (!frag || seen.has(frag.name.value)) continue;
      const type = walk.schema.getType(frag.typeCondition.name.value);
      walkSelections(frag.selectionSet, isObjectType(type) ? type : parent, depth, multiplier, walk, new Set([...seen, frag.name.value]));
    } else if (sel.kind === Kind.INLINE_FRAGMENT) {
      const type = sel.typeCondition ? walk.schema.getType(sel.typeCondition.name.value) : parent;
      walkSelections(sel.selectionSet, isObjectType(type) ? type : parent, depth, multiplier, walk, seen);
    } else {
      if (isIntrospection(sel.name.value)) continue; // the schema itself: no database work
      const fieldDepth = depth + 1;
      walk.maxDepth = Math.max(walk.maxDepth, fieldDepth);
      const def = parent && (isObjectType(parent) || isInterfaceType(parent)) ? parent.getFields()[sel.name.value] : undefined;
      const type = def ? getNamedType(def.type) : null;
      let next = multiplier;
      if (type && isConnection(type.name)) {
        const size = pageSize(sel, walk);
        if (size === null) {
          walk.report(`${sel.name.value}: give first or last (at most ${MAX_PAGE}) to page through it.`, sel);
          next = multiplier * MAX_PAGE;
        } else {
          next = multiplier * Math.max(size, 1);
        }
        walk.nodes += next;
      }
      if (sel.selectionSet) walkSelections(sel.selectionSet, isObjectType(type) ? type : null, fieldDepth, next, walk, seen);
    }
  }
}

/**
 * Refuses a document deeper than MAX_DEPTH, a connection without a page size (or with
 * an offset, which reads every skipped row), and more than MAX_NODES rows.
 */
export const queryLimitsRule: ValidationRule = (context: ValidationContext) => {
  const schema = context.getSchema();
  const doc = context.getDocument();
  const fragments: Record<string, FragmentDefinitionNode> = {};
  for (const def of doc.definitions) if (def.kind === Kind.FRAGMENT_DEFINITION) fragments[def.name.value] = def;
  return {
    OperationDefinition(op) {
      const walk: Walk = {
        schema, fragments, nodes: 0, maxDepth: 0,
        report: (message, node) => context.reportError(new GraphQLError(message, { nodes: node, extensions: { code: 'QUERY_TOO_COSTLY' } })),
      };
      const root = op.operation === 'query' ? schema.getQueryType() : op.operation === 'mutation' ? schema.getMutationType() : schema.getSubscriptionType();
      if (!root) {
        // graphql-js 16 leaves this to execution; refuse it here, with a plain answer.
        context.reportError(new GraphQLError(`This API is read-only: it has no ${op.operation}s.`, { nodes: op }));
        return false;
      }
      walkSelections(op.selectionSet, root, 0, 1, walk, new Set());
      if (walk.maxDepth > MAX_DEPTH) {
        context.reportError(new GraphQLError(`The query is ${walk.maxDepth} levels deep; at most ${MAX_DEPTH} are allowed.`,
          { nodes: op, extensions: { code: 'QUERY_TOO_DEEP' } }));
      }
      if (walk.nodes > MAX_NODES) {
        context.reportError(new GraphQLError(`The query may read ${walk.nodes} rows; at most ${MAX_NODES} are allowed: ask for smaller pages.`,
          { nodes: op, extensions: { code: 'QUERY_TOO_COSTLY' } }));
      }
      return false;
    },
  };
};

/** A page size given as a variable must be a number from 0 to MAX_PAGE (null would mean every row). */
export function pageVariablesError(document: DocumentNode, variables: Record<string, unknown> | undefined): string | null {
  const defaults: Record<string, unknown> = {};
  const names = new Set<string>();
  const visit = (node: unknown) => {
    if (!node || typeof node !== 'object') return;
    if (Array.isArray(node)) { node.forEach(visit); return; }
    const n = node as { kind?: string; name?: { value: string }; value?: { kind: string; name?: { value: string } } };
    if (n.kind === Kind.ARGUMENT && (n.name?.value === 'first' || n.name?.value === 'last') && n.value?.kind === Kind.VARIABLE) {
      names.add(n.value.name!.value);
    }
    for (const [key, child] of Object.entries(node)) if (key !== 'loc') visit(child);
  };
  for (const def of document.definitions) {
    if (def.kind === Kind.OPERATION_DEFINITION) {
      for (const v of def.variableDefinitions ?? []) {
        if (v.defaultValue?.kind === Kind.INT) defaults[v.variable.name.value] = Number(v.defaultValue.value);
      }
    }
    visit(def);
  }
  for (const name of names) {
    const value = variables?.[name] ?? defaults[name];
    if (typeof value !== 'number' || value < 0 || value > MAX_PAGE) {
      return `$${name}: a page size must be a number from 0 to ${MAX_PAGE}.`;
    }
  }
  return null;
}
