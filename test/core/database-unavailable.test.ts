// src/core/errors.ts databaseUnavailableCause: which errors mean "the database cannot be
// reached right now" (503 service_unavailable with Retry-After, docs/operations.md
// "Database outages") and which do not (they keep their own mapping, or 500).
import { databaseUnavailableCause, DATABASE_RETRY_AFTER_SECONDS, toApiError } from '../../src/core/errors';

const sqlstate = (code: string, message = 'x') => Object.assign(new Error(message), { code });

test.each([
  ['connection refused', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })],
  ['connection reset', Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })],
  ['connect timed out (socket)', Object.assign(new Error('connect ETIMEDOUT'), { code: 'ETIMEDOUT' })],
  ['host unreachable', Object.assign(new Error('connect EHOSTUNREACH'), { code: 'EHOSTUNREACH' })],
  ['DNS failure', Object.assign(new Error('getaddrinfo ENOTFOUND db'), { code: 'ENOTFOUND' })],
  ['pg: connection cut', new Error('Connection terminated unexpectedly')],
  ['pg: connect timeout', new Error('Connection terminated due to connection timeout')],
  ['pg-pool: no connection in time', new Error('timeout exceeded when trying to connect')],
  ['pg: read timeout', new Error('Query read timeout')],
  ['pg: client broken', new Error('Client has encountered a connection error and is not queryable')],
  ['08006 connection failure', sqlstate('08006')],
  ['08001 cannot establish', sqlstate('08001')],
  ['57P01 admin shutdown (a restart)', sqlstate('57P01', 'terminating connection due to administrator command')],
  ['57P02 crash shutdown', sqlstate('57P02')],
  ['57P03 cannot connect now (starting up)', sqlstate('57P03', 'the database system is starting up')],
  ['53300 too many connections', sqlstate('53300')],
  ['wrapped (graphile-worker coerceError)', new Error('read ECONNRESET', { cause: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }) })],
  ['AggregateError (every address refused)', Object.assign(new AggregateError([Object.assign(new Error('a'), { code: 'ECONNREFUSED' })], ''), {})],
])('%s is an outage: 503 service_unavailable with Retry-After', (_name, err) => {
  expect(databaseUnavailableCause(err)).toEqual(expect.any(String));
  const mapped = toApiError(err);
  expect({ code: mapped.code, status: mapped.status, retryAfter: mapped.retryAfter }).toEqual({ code: 'service_unavailable', status: 503, retryAfter: DATABASE_RETRY_AFTER_SECONDS });
  // Nothing of the driver's message reaches the client.
  expect(mapped.toProblem().detail).toBe('The database is unavailable; retry shortly.');
});

test.each([
  ['a unique violation', sqlstate('23505'), 'internal_error'],
  ['a deadlock', sqlstate('40P01'), 'internal_error'],
  ['a statement timeout', sqlstate('57014', 'canceling statement due to statement timeout'), 'internal_error'],
  ['a rule of ours', sqlstate('BL409', 'Not cancelling.'), 'conflict'],
  ['a bug', new TypeError('x is undefined'), 'internal_error'],
  ['a non-error', 'boom', 'internal_error'],
])('%s is not an outage', (_name, err, code) => {
  expect(databaseUnavailableCause(err)).toBeNull();
  expect(toApiError(err).code).toBe(code);
  expect(toApiError(err).retryAfter).toBeUndefined();
});
