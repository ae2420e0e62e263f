// What /graphql tells a client of an error, and where the rest goes: a database or
// programming error (its message may hold a member's data) reaches the client as an id
// only and the service's log as a JSON line with the error, never the console, where
// grafserv's own masking printed it with its stack.
import type pg from 'pg';
import { SafeError } from 'postgraphile/grafast';
import { GraphQLError } from 'postgraphile/graphql';
import { captureLogs } from '../../src/core/log';
import { graphqlPreset, maskGraphqlError } from '../../src/graphql/graphql-preset';

const wrapped = (original: Error) => new GraphQLError(original.message, { path: ['subscriptions', 'nodes', 0, 'status'], originalError: original });

test('an unexpected error reaches the client as an id and the log as a line, not the console', () => {
  const consoleError = jest.spyOn(console, 'error').mockImplementation(() => {});
  const logs = captureLogs('error');
  try {
    const dbError = Object.assign(new Error('duplicate key value violates unique constraint: (email)=(ada@example.com)'), { code: '23505' });
    const masked = maskGraphqlError(wrapped(dbError));
    expect(masked.message).toMatch(/^An error occurred \(logged with id '[0-9a-f-]{36}'\)\.$/);
    expect(masked.message).not.toContain('ada@example.com');
    expect(masked.path).toEqual(['subscriptions', 'nodes', 0, 'status']);
    const errorId = masked.extensions.errorId as string;
    expect(masked.message).toContain(errorId);
    const lines = logs.lines.map((l) => JSON.parse(l) as { msg: string; error_id: string; component: string; err: { message: string; code: string } });
    expect(lines).toEqual([expect.objectContaining({ msg: 'masked GraphQL error', component: 'graphql', error_id: errorId })]);
    expect(lines[0].err).toMatchObject({ code: '23505', message: dbError.message });
    expect(consoleError).not.toHaveBeenCalled();
  } finally {
    logs.stop();
    consoleError.mockRestore();
  }
});

test('GraphQL errors and safe errors reach the client as they are, and nothing is logged', () => {
  const logs = captureLogs('debug');
  try {
    const plain = new GraphQLError('Cannot query field "nope" on type "Query".');
    expect(maskGraphqlError(plain)).toBe(plain);
    const safe = maskGraphqlError(wrapped(new SafeError('Invalid cursor', { code: 'BAD_CURSOR' })));
    expect(safe.message).toBe('Invalid cursor');
    expect(safe.extensions).toEqual({ code: 'BAD_CURSOR' });
    expect(logs.lines).toEqual([]);
  } finally {
    logs.stop();
  }
});

test('the /graphql preset masks errors with it', () => {
  const preset = graphqlPreset({ pool: {} as pg.Pool, graphiql: false, introspection: false, identityOf: () => undefined });
  expect(preset.grafserv?.maskError).toBe(maskGraphqlError);
});
