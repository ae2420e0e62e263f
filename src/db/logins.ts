// The service's own database logins. Only migrations run as the owner (DATABASE_URL);
// the API pool connects as billing_app (then switches to billing_api) and the worker as
// billing_worker: neither is a member of the owner, so no SQL they run can become it.
// The migration creates both roles without LOGIN; at start, the owner gives them LOGIN
// and a password derived from DATABASE_URL's password (HMAC, one per role), so every
// process that knows DATABASE_URL computes the same one, the password never needs to be
// stored, and the safe setup needs nothing but DATABASE_URL. APP_DATABASE_URL and
// WORKER_DATABASE_URL replace this with logins of the operator's own.
import crypto from 'node:crypto';
import pg from 'pg';

export type ServiceLogin = 'billing_app' | 'billing_worker';

/** The password of a service login, derived from the owner's credentials. */
export function derivedPassword(ownerUrl: string, role: ServiceLogin): string {
  const url = new URL(ownerUrl);
  const secret = decodeURIComponent(url.password) || process.env.PGPASSWORD || '';
  const user = decodeURIComponent(url.username) || process.env.PGUSER || '';
  return crypto.createHmac('sha256', secret).update(`billing login\0${user}\0${role}`).digest('base64url');
}

/** DATABASE_URL with the login's user and password instead of the owner's. */
export function loginUrl(ownerUrl: string, role: ServiceLogin): string {
  const url = new URL(ownerUrl);
  url.username = role;
  url.password = derivedPassword(ownerUrl, role);
  return url.toString();
}

/**
 * A SCRAM-SHA-256 verifier for ALTER ROLE ... PASSWORD, so the clear password never
 * reaches the server (nor its statement log).
 */
export function scramVerifier(password: string): string {
  const salt = crypto.randomBytes(16);
  const iterations = 4096;
  const salted = crypto.pbkdf2Sync(password, salt, iterations, 32, 'sha256');
  const clientKey = crypto.createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = crypto.createHash('sha256').update(clientKey).digest();
  const serverKey = crypto.createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

async function canConnect(url: string): Promise<{ ok: true } | { ok: false; code?: string; error: Error }> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  try {
    await client.connect();
    await client.query('select 1');
    return { ok: true };
  } catch (err) {
    return { ok: false, code: (err as { code?: string }).code, error: err as Error };
  } finally {
    await client.end().catch(() => {});
  }
}

// 28P01 wrong password, 28000 role may not log in (NOLOGIN, fresh from the migration).
const FIXABLE = new Set(['28P01', '28000']);

/**
 * The connection string of a service login, made usable first if it is not: as the
 * owner, LOGIN and the derived password. Needs the migrations (which create the roles)
 * applied and an owner with CREATEROLE.
 */
export async function ensureLogin(ownerUrl: string, role: ServiceLogin): Promise<string> {
  const url = loginUrl(ownerUrl, role);
  const first = await canConnect(url);
  if (first.ok) return url;
  if (!first.code || !FIXABLE.has(first.code)) throw first.error;
  const owner = new pg.Client({ connectionString: ownerUrl });
  await owner.connect();
  try {
    const sql = `alter role ${pg.escapeIdentifier(role)} with login password ${owner.escapeLiteral(scramVerifier(derivedPassword(ownerUrl, role)))}`;
    for (let attempt = 0; ; attempt++) {
      try {
        await owner.query(sql);
        break;
      } catch (err) {
        // Two processes starting at once: "tuple concurrently updated"; the other one wrote the same password.
        if (attempt >= 2 || (err as { code?: string }).code !== 'XX000') throw err;
        await new Promise((resolve) => setTimeout(resolve, 100 + Math.random() * 200));
      }
    }
  } finally {
    await owner.end().catch(() => {});
  }
  const second = await canConnect(url);
  if (!second.ok) throw second.error;
  return url;
}
