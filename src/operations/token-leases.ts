// Rate tokens taken from a key's bucket a few at a time (a lease) and spent by this
// process without touching the bucket again: a read then writes nothing, and the
// requests of one busy key no longer queue on its bucket row.
//
// The bucket stays in the database (billing_private.take_tokens), shared by every
// process, and a token is taken from it before it is spent. What a lease changes, per
// process (docs/decisions/leased-rate-tokens.md):
// - up to size - 1 tokens taken but not yet spent are invisible to the other
//   processes until the lease expires (1 s by default); the next lease of the key puts
//   them back (they are lost only if the process stops first);
// - the bucket records each lease's tokens until it expires and refills only up to the
//   burst less them, so however many processes lease, a key never spends more than its
//   burst plus what refilled (docs/decisions/shared-worker-and-lease-bounds.md). For
//   that the lease's lifetime here counts from before it was asked for: this process
//   stops spending it before the bucket stops counting it.
// The key itself is checked again on every request (billing.gate_run, src/operations/gate.ts): a
// revocation holds from the next request on.
import type pg from 'pg';
import type { RateLimits } from '../core/config';

/** What the RateLimit-* headers of an answer say. */
export interface RateLimitInfo {
  limit: number;
  remaining: number;
  reset: number;
  retry_after: number;
}

const MAX_LEASE = 20;
/** What billing_private.lease_key_tokens grants at most. */
const MAX_GROWN_LEASE = 100;

/** Tokens per lease for a burst: a tenth of it, 1 to 20; 1 means "do not lease". */
export function leaseSize(burst: number): number {
  return Math.max(1, Math.min(MAX_LEASE, Math.floor(burst / 10)));
}

/**
 * The most a key's lease grows to when its requests spend it fast: still a tenth of
 * the burst at most, and no more than the database grants (100).
 */
export function grownLeaseSize(burst: number): number {
  return Math.max(leaseSize(burst), Math.min(MAX_GROWN_LEASE, Math.floor(burst / 10)));
}

/** The key a lease was granted for: what the access log names a request by. */
export interface LeasedKey {
  communityId: string;
  keyId: string;
}

export type LeaseAnswer =
  | { kind: 'token'; rl: RateLimitInfo; key?: LeasedKey }
  | { kind: 'limited'; rl: RateLimitInfo }
  /** Missing, unknown or revoked key: the caller takes the unauthenticated path. */
  | { kind: 'unknown' };

interface Lease {
  left: number;
  expires: number;
  /** The bucket right after the lease was taken. */
  bucket: RateLimitInfo | null;
  /** The bucket row's id for the lease: named when it is given back. */
  id: string | null;
  key: LeasedKey | null;
  /** Tokens the next lease asks for: doubled when the last was spent in under half its lifetime. */
  size: number;
  /** When the last lease was granted (ms). */
  grantedAt: number;
  pending: Promise<LeaseAnswer> | null;
}

interface BucketAnswer extends RateLimitInfo {
  key: boolean;
  allowed?: boolean;
  granted?: number;
  lease?: string | null;
  key_id?: string;
  community_id?: string;
}

export class TokenLeases {
  readonly size: number;
  private readonly maxSize: number;
  private readonly leases = new Map<string, Lease>();

  constructor(private readonly pool: pg.Pool, private readonly limits: RateLimits, private readonly lifetimeMs: number) {
    this.size = leaseSize(limits.key_burst);
    this.maxSize = grownLeaseSize(limits.key_burst);
  }

  get enabled(): boolean {
    return this.size > 1;
  }

  /** One token of the key (by hash) for one request. */
  async take(keyHash: string): Promise<LeaseAnswer> {
    // waited: this request waited for a lease to be granted. It spends from it even if
    // the round trip outlasted the lease's lifetime: a database slower than the lifetime
    // would otherwise have every request lease again forever.
    for (let waited = false; ; waited = true) {
      const lease = this.leases.get(keyHash) ?? this.fresh(keyHash);
      if (lease.left > 0 && (waited || Date.now() < lease.expires) && lease.bucket) {
        lease.left -= 1;
        return { kind: 'token', rl: this.headers(lease.bucket, lease.left), key: lease.key ?? undefined };
      }
      if (lease.pending) {
        const answer = await lease.pending;
        if (answer.kind !== 'token') return answer;
        continue;
      }
      // Unspent tokens of an expired lease go back with the next one, and the row
      // forgets that lease, which it may still count for a few milliseconds.
      const unspent = lease.left;
      const returned = lease.id;
      // A key busy enough to spend a lease in under half its lifetime asks for twice as
      // many next time (up to maxSize), so its requests stop queueing on a lease every
      // few milliseconds; one that left tokens unspent asks for half as many.
      if (lease.grantedAt > 0 && unspent === 0 && Date.now() - lease.grantedAt < this.lifetimeMs / 2) {
        lease.size = Math.min(this.maxSize, lease.size * 2);
      } else if (unspent > 0) {
        lease.size = Math.max(this.size, Math.floor(lease.size / 2));
      }
      lease.left = 0;
      lease.id = null;
      lease.pending = this.lease(keyHash, lease, unspent, returned).finally(() => { lease.pending = null; });
    }
  }

  /** The key of this process's last lease for keyHash, if it still remembers it. */
  keyOf(keyHash: string): LeasedKey | undefined {
    return this.leases.get(keyHash)?.key ?? undefined;
  }

  private fresh(keyHash: string): Lease {
    if (this.leases.size >= 10_000) this.forgetExpired();
    const lease: Lease = { left: 0, expires: 0, bucket: null, id: null, key: null, size: this.size, grantedAt: 0, pending: null };
    this.leases.set(keyHash, lease);
    return lease;
  }

  private forgetExpired(): void {
    const now = Date.now();
    for (const [hash, lease] of this.leases) {
      if (!lease.pending && lease.expires <= now) this.leases.delete(hash);
    }
  }

  private async lease(keyHash: string, lease: Lease, unspent: number, returned: string | null): Promise<LeaseAnswer> {
    const asked = Date.now();
    const { rows } = await this.pool.query<{ r: BucketAnswer }>(
      'select billing_private.lease_key_tokens($1, $2, $3, $4, $5) as r',
      [keyHash, lease.size, { ...this.limits, lease_ms: this.lifetimeMs }, unspent, returned]);
    const r = rows[0].r;
    if (!r.key) {
      this.leases.delete(keyHash);
      return { kind: 'unknown' };
    }
    const bucket: RateLimitInfo = { limit: r.limit, remaining: r.remaining, reset: r.reset, retry_after: r.retry_after };
    if (!r.allowed) return { kind: 'limited', rl: bucket };
    lease.left = r.granted ?? 1;
    lease.expires = asked + this.lifetimeMs;
    lease.grantedAt = Date.now();
    lease.bucket = bucket;
    lease.id = r.lease ?? null;
    lease.key = r.key_id && r.community_id ? { communityId: r.community_id, keyId: r.key_id } : null;
    return { kind: 'token', rl: bucket, key: lease.key ?? undefined };
  }

  /** What a request's RateLimit headers say: the bucket plus this process's unspent tokens. */
  private headers(bucket: RateLimitInfo, left: number): RateLimitInfo {
    const available = Math.min(this.limits.key_burst, bucket.remaining + left);
    const perSecond = this.limits.key_per_minute / 60;
    return { ...bucket, remaining: available, reset: Math.ceil(Math.max(0, this.limits.key_burst - available) / perSecond) };
  }
}

/**
 * A key's tokens for standby reads while the primary cannot lease any (it is lost or
 * unreachable): a bucket in this process only, holding `share` of the key's limits
 * (READ_TOKEN_SHARE). With n API processes a key then reads at most n × share of its
 * limits; none of them is recorded in the database's bucket (docs/decisions/read-replicas.md).
 */
export class LocalTokens {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private readonly burst: number;
  private readonly perMs: number;

  constructor(limits: RateLimits, share: number) {
    this.burst = Math.max(1, Math.floor(limits.key_burst * share));
    this.perMs = (limits.key_per_minute * share) / 60_000;
  }

  take(keyHash: string): LeaseAnswer {
    const now = Date.now();
    if (this.buckets.size >= 10_000) {
      for (const [hash, b] of this.buckets) if (b.tokens + (now - b.at) * this.perMs >= this.burst) this.buckets.delete(hash);
    }
    const b = this.buckets.get(keyHash) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + (now - b.at) * this.perMs);
    b.at = now;
    this.buckets.set(keyHash, b);
    const allowed = b.tokens >= 1;
    if (allowed) b.tokens -= 1;
    const remaining = Math.floor(b.tokens);
    const rl: RateLimitInfo = {
      limit: this.burst, remaining,
      reset: Math.ceil((this.burst - b.tokens) / this.perMs / 1000),
      retry_after: allowed ? 0 : Math.ceil((1 - b.tokens) / this.perMs / 1000),
    };
    return allowed ? { kind: 'token', rl } : { kind: 'limited', rl };
  }
}
