// Where GraphQL is served: a module of its own, so the banner of src/main.ts names the
// paths without loading PostGraphile.
export const GRAPHQL_PATH = '/graphql';
export const GRAPHIQL_PATH = '/graphiql';
