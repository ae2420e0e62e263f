// READ_DATABASE_URL, READ_MAX_LAG and READ_TOKEN_SHARE as loadConfig reads them
// (docs/decisions/read-replicas.md), and the WAL positions the standbys are compared by.
import { loadConfig } from '../../src/core/config';
import { lsn } from '../../src/db/read-replicas';
import { LocalTokens } from '../../src/operations/token-leases';

test('no READ_DATABASE_URL: no standby; the lag bound 1 s; the local share one half', () => {
  const config = loadConfig({});
  expect(config.readDatabaseUrls).toEqual([]);
  expect(config.readMaxLagMs).toBe(1000);
  expect(config.readTokenShare).toBe(0.5);
});

test('several standbys, comma-separated; READ_MAX_LAG in seconds', () => {
  const config = loadConfig({
    READ_DATABASE_URL: 'postgres://billing_app:a@standby1:5432/billing, postgresql://billing_app:b@standby2/billing',
    READ_MAX_LAG: '0.25', READ_TOKEN_SHARE: '0.2',
  });
  expect(config.readDatabaseUrls).toEqual(['postgres://billing_app:a@standby1:5432/billing', 'postgresql://billing_app:b@standby2/billing']);
  expect(config.readMaxLagMs).toBe(250);
  expect(config.readTokenShare).toBe(0.2);
});

test('refused: a URL that is not postgres:// (its password not echoed), a lag or share out of range', () => {
  expect(() => loadConfig({ READ_DATABASE_URL: 'http://u:secret@standby/billing' })).toThrow(/READ_DATABASE_URL: expected postgres:\/\/ URLs/);
  expect(() => loadConfig({ READ_DATABASE_URL: 'http://u:secret@standby/billing' })).not.toThrow(/secret/);
  expect(() => loadConfig({ READ_MAX_LAG: '-1' })).toThrow(/positive number/);
  expect(() => loadConfig({ READ_TOKEN_SHARE: '2' })).toThrow(/READ_TOKEN_SHARE/);
});

test('WAL positions compare as numbers', () => {
  expect(lsn('0/16B3748')).toBe(0x16B3748n);
  expect(lsn('1/0')! > lsn('0/FFFFFFFF')!).toBe(true);
  expect(lsn(null)).toBeNull();
});

test("the local share of a key's limits: share × burst at once, then share × the rate", () => {
  const tokens = new LocalTokens({ key_per_minute: 60, key_burst: 10, ip_per_minute: 1, ip_burst: 1 }, 0.5);
  const answers = Array.from({ length: 6 }, () => tokens.take('k').kind);
  expect(answers).toEqual(['token', 'token', 'token', 'token', 'token', 'limited']);
  expect(tokens.take('other').kind).toBe('token');
});
