// Streaming standbys for the read operations (READ_DATABASE_URL, READ_MAX_LAG;
// docs/decisions/read-replicas.md). Each standby has its own API pool (billing_api, as
// the primary's) and is checked every CHECK_MS: how far it is behind the primary, and
// the WAL position it has replayed. The gate (src/operations/gate.ts) asks for a
// standby per read:
// - none when none is up, answers as billing_api and is within READ_MAX_LAG;
// - for a key that wrote in the last seconds, only one whose replayed position had
//   reached the primary's WAL position after that write (read-your-writes; never a
//   wait: else the primary answers).
// A standby whose query fails (unreachable, 25006 read-only, recovery conflicts) is
// marked down until its next good check; the gate then asks the primary.
import { AsyncLocalStorage } from 'node:async_hooks';
import pg from 'pg';
import type { DatabasePooler, DbTimeouts } from '../core/config';
import { readReplicaLag, readReplicaUp, readsServed } from '../core/metrics';
import { createApiPool } from './pool';

/** How often each standby's lag and replayed position are read. */
export const CHECK_MS = 200;

/** A WAL position ('16/B374D848') as a number. */
export function lsn(text: string | null | undefined): bigint | null {
  if (!text) return null;
  const m = /^([0-9A-F]+)\/([0-9A-F]+)$/i.exec(text);
  return m ? (BigInt(`0x${m[1]}`) << 32n) + BigInt(`0x${m[2]}`) : null;
}

export interface Replica {
  /** The URL without its password, for logs and metrics. */
  readonly name: string;
  readonly pool: pg.Pool;
}

interface ReplicaState extends Replica {
  up: boolean;
  lagMs: number;
  replayed: bigint | null;
  /** Why it is not used (logged once per change). */
  why: string | null;
}

interface Written { lsn: bigint; until: number }

export interface ReadReplicasOptions {
  urls: string[];
  maxLagMs: number;
  poolSize: number;
  timeouts: DbTimeouts;
  pooler: DatabasePooler;
  log?: (line: string) => void;
}

const STANDBY_CHECK = `select pg_is_in_recovery() as standby, current_user::text as role,
  pg_last_wal_replay_lsn()::text as replayed, pg_last_wal_receive_lsn()::text as received,
  extract(epoch from (now() - pg_last_xact_replay_timestamp())) * 1000 as behind_ms`;

export class ReadReplicas {
  private readonly replicas: ReplicaState[];
  private readonly written = new Map<string, Written>();
  /** How long a key's write keeps its reads off a standby that has not replayed it. */
  readonly rememberMs: number;
  private timer: NodeJS.Timeout | null = null;
  private next = 0;
  private checking: Promise<void> | null = null;

  constructor(private readonly primary: pg.Pool, private readonly opts: ReadReplicasOptions) {
    this.replicas = opts.urls.map((url) => ({
      name: redact(url),
      // Fewer connections than the primary's pool: reads are short, one round trip each.
      pool: createApiPool(url, Math.max(2, Math.ceil(opts.poolSize / 2)), opts.timeouts, opts.pooler),
      up: false, lagMs: Infinity, replayed: null, why: 'not checked yet',
    }));
    // A standby within READ_MAX_LAG has replayed any write older than that (plus a check).
    this.rememberMs = Math.max(5000, 2 * opts.maxLagMs + 2 * CHECK_MS);
  }

  get pools(): pg.Pool[] {
    return this.replicas.map((r) => r.pool);
  }

  /** Checks at once, then every CHECK_MS (the timer does not keep the process alive). */
  start(): Promise<void> {
    if (!this.timer) {
      this.timer = setInterval(() => { void this.check(); }, CHECK_MS);
      this.timer.unref();
    }
    return this.check();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.checking;
    await Promise.all(this.replicas.map((r) => r.pool.end().catch(() => {})));
  }

  /** One round of checks (the primary's position first, then each standby's); never throws. */
  check(): Promise<void> {
    this.checking ??= this.checkAll().finally(() => { this.checking = null; });
    return this.checking;
  }

  private async checkAll(): Promise<void> {
    // The primary's position first: a standby that replayed it is not behind at all,
    // however long ago its last transaction was (an idle primary).
    let primaryLsn: bigint | null = null;
    const asked = Date.now();
    try {
      const { rows } = await this.primary.query<{ l: string }>({ text: 'select pg_current_wal_lsn()::text as l', query_timeout: 2000 } as pg.QueryConfig);
      primaryLsn = lsn(rows[0].l);
      if (primaryLsn !== null) this.remember(asked, primaryLsn);
    } catch {
      // A lost primary: the standbys still answer reads, judged by what they received.
    }
    await Promise.all(this.replicas.map((r) => this.checkOne(r, primaryLsn)));
    this.forgetOldWrites();
  }

  private async checkOne(r: ReplicaState, primaryLsn: bigint | null): Promise<void> {
    try {
      const { rows } = await r.pool.query<{ standby: boolean; role: string; replayed: string | null; received: string | null; behind_ms: number | null }>(
        { text: STANDBY_CHECK, query_timeout: 2000 } as pg.QueryConfig);
      const s = rows[0];
      if (s.role !== 'billing_api') return this.set(r, false, `it answers as ${s.role}, not billing_api`);
      if (!s.standby) return this.set(r, false, 'it is not a standby (promoted?)');
      const replayed = lsn(s.replayed);
      const received = lsn(s.received);
      const caughtUp = replayed !== null && (primaryLsn !== null ? replayed >= primaryLsn : received === null || replayed >= received);
      r.replayed = replayed;
      r.lagMs = caughtUp ? 0 : Math.min(this.behindByPosition(replayed), Number(s.behind_ms ?? Infinity));
      if (r.lagMs > this.opts.maxLagMs) return this.set(r, false, `${Math.round(r.lagMs)} ms behind`);
      this.set(r, true, null);
    } catch (err) {
      this.set(r, false, `unreachable: ${(err as Error).message}`);
    }
  }

  /** The primary's positions of the last few seconds, oldest first: when it was at each. */
  private readonly positions: Array<{ at: number; lsn: bigint }> = [];

  private remember(at: number, position: bigint): void {
    const last = this.positions[this.positions.length - 1];
    if (!last || last.lsn !== position) this.positions.push({ at, lsn: position });
    else last.at = at; // still there at this time
    const keep = Math.max(10_000, 5 * this.opts.maxLagMs);
    while (this.positions.length > 1 && this.positions[0].at < at - keep) this.positions.shift();
  }

  /**
   * How far behind a standby that replayed up to `replayed` is at most: since the last
   * check at which the primary had written no further. With
   * now() - pg_last_xact_replay_timestamp(), also an upper bound, the smaller counts:
   * that one alone makes a standby look late after a quiet spell when the primary
   * writes WAL without transactions (checkpoints, standby snapshots) the moment before
   * a check; this one alone is late by up to a check interval under steady writes.
   */
  private behindByPosition(replayed: bigint | null): number {
    if (replayed === null) return Infinity;
    for (let i = this.positions.length - 1; i >= 0; i--) {
      if (this.positions[i].lsn <= replayed) return Date.now() - this.positions[i].at;
    }
    return Infinity;
  }

  private set(r: ReplicaState, up: boolean, why: string | null): void {
    if (why !== r.why && !(why && r.why && why.endsWith(' ms behind') && r.why.endsWith(' ms behind'))) {
      this.opts.log?.(up ? `read replica ${r.name}: in use` : `read replica ${r.name}: skipped (${why})`);
    }
    r.up = up;
    r.why = why;
    readReplicaUp.set({ replica: r.name }, up ? 1 : 0);
    if (Number.isFinite(r.lagMs)) readReplicaLag.set({ replica: r.name }, r.lagMs / 1000);
  }

  /**
   * A standby for a read by this key (the sha256 of its credential), or null: the
   * primary. Round robin over those up, within the lag, and past the key's last write.
   */
  pick(keyHash: string | null): Replica | null {
    const wrote = keyHash ? this.written.get(keyHash) : undefined;
    const floor = wrote && wrote.until > Date.now() ? wrote.lsn : null;
    const n = this.replicas.length;
    for (let i = 0; i < n; i++) {
      const r = this.replicas[(this.next + i) % n];
      if (!r.up || r.lagMs > this.opts.maxLagMs) continue;
      if (floor !== null && (r.replayed === null || r.replayed < floor)) continue;
      this.next = (this.next + i + 1) % n;
      return r;
    }
    return null;
  }

  /** A query on that standby failed: not used again until a check finds it well. */
  failed(replica: Replica, err: unknown): void {
    const r = this.replicas.find((x) => x === replica);
    if (r) this.set(r, false, `a read failed: ${(err as Error).message}`);
  }

  /**
   * After a write by this key committed on the primary: its reads avoid any standby
   * that has not replayed the primary's position now. The mark is set before this
   * returns its promise (the caller need not wait for the position, nor the answer
   * for it); never rejects. Without the position the key's reads stay on the primary
   * for rememberMs.
   */
  async wrote(keyHash: string | null): Promise<void> {
    if (!keyHash || this.replicas.length === 0) return;
    const until = Date.now() + this.rememberMs;
    // Meanwhile (and if the position cannot be read): nothing any standby has replayed.
    this.written.set(keyHash, { lsn: 1n << 62n, until });
    try {
      const { rows } = await this.primary.query<{ l: string }>('select pg_current_wal_lsn()::text as l');
      this.written.set(keyHash, { lsn: lsn(rows[0].l) ?? 1n << 62n, until });
    } catch {
      // kept as above
    }
  }

  private forgetOldWrites(): void {
    if (this.written.size < 1000) return;
    const now = Date.now();
    for (const [key, w] of this.written) if (w.until <= now) this.written.delete(key);
  }

  /** For /metrics and tests: each standby's state. */
  states(): Array<{ name: string; up: boolean; lagMs: number; why: string | null }> {
    return this.replicas.map((r) => ({ name: r.name, up: r.up, lagMs: r.lagMs, why: r.why }));
  }
}

function redact(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'READ_DATABASE_URL';
  }
}

/** The standby a GraphQL request's statements run on (routingPool), set around its execution. */
export const readTarget = new AsyncLocalStorage<Replica | null>();

/**
 * A pool that hands out a connection of the standby readTarget names, or else (no
 * standby chosen, or it cannot be reached) of the primary: for PostGraphile, which
 * takes one pool for every request (src/graphql). Everything else is the primary's.
 */
export function routingPool(primary: pg.Pool, reads: ReadReplicas): pg.Pool {
  const connect = async (): Promise<pg.PoolClient> => {
    const replica = readTarget.getStore();
    if (replica) {
      try {
        const client = await replica.pool.connect();
        readsServed.inc({ target: 'standby' });
        return client;
      } catch (err) {
        reads.failed(replica, err);
      }
      readsServed.inc({ target: 'primary' });
    }
    return primary.connect();
  };
  return new Proxy(primary, {
    get(target, prop) {
      if (prop === 'connect') return connect;
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}
