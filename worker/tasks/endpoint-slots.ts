// A webhook endpoint's slots shared by every worker process: session advisory locks,
// (hashtext of the endpoint, slot number), held on one connection of this process for
// as long as a delivery job runs (docs/decisions/shared-worker-and-lease-bounds.md).
//
// A lock lives exactly as long as the session holding it: a worker that dies, or whose
// connection is cut (a database restart, a network failure), loses its slots at once,
// and nothing is left counted for anyone to clean up. That is what the slots of
// migration 000063, rows of a table with an expiry, could not promise.
//
// When the database cannot be asked (no connection, an answer slower than the
// timeout) a delivery goes on under the process's own gate alone: the job needs the
// database anyway to load and record its deliveries, and an outage must not stop
// them once it ends.
import pg from 'pg';

/** A slot this process holds: the endpoint's lock key, the slot number, the session it is held on. */
export interface HeldSlot {
  key: string;
  slot: number;
  generation: number;
}

/** Slots this process's session holds per endpoint key (a session's advisory locks are re-entrant: it must not take one twice). */
type Holding = Map<string, Set<number>>;

const TAKE = `select s from generate_series(0, $2::int - 1) s
  where case when s = any($3::int[]) then false else pg_try_advisory_lock(hashtext($1), s) end
  limit 1`;

export class SharedEndpointSlots {
  private client: pg.Client | null = null;
  private connecting: Promise<pg.Client> | null = null;
  /** Bumped whenever the session is lost: slots of an older one are no longer held. */
  private generation = 0;
  private holding: Holding = new Map();
  private closed = false;
  private taking: Promise<void> = Promise.resolve();

  constructor(private readonly connectionString: string, private readonly timeoutMs: number) {}

  /**
   * A slot of the endpoint below cap, shared with every worker process: the slot; null
   * when every one is held (by other processes); undefined when the database cannot be
   * asked (the caller's own bound holds alone).
   */
  take(communityId: string, endpointId: string, cap: number): Promise<HeldSlot | null | undefined> {
    // One at a time: two takes in flight would both pass over the slots this session
    // holds and could lock the same one twice (a session's advisory locks are
    // re-entrant). Statements on the one connection queue anyway.
    const next = this.taking.then(() => this.takeNow(communityId, endpointId, cap));
    this.taking = next.then(() => undefined, () => undefined);
    return next;
  }

  private async takeNow(communityId: string, endpointId: string, cap: number): Promise<HeldSlot | null | undefined> {
    const key = `webhook-endpoint ${communityId} ${endpointId}`;
    try {
      const { client, generation } = await this.session();
      const mine = this.holding.get(key) ?? new Set<number>();
      if (mine.size >= cap) return null;
      const { rows } = await this.timed(client.query<{ s: number }>(TAKE, [key, cap, [...mine]]));
      if (generation !== this.generation) return undefined;
      if (rows.length === 0) return null;
      mine.add(rows[0].s);
      this.holding.set(key, mine);
      return { key, slot: rows[0].s, generation };
    } catch {
      this.drop();
      return undefined;
    }
  }

  /** Gives the slot back (nothing to do when its session is gone: the lock went with it). */
  async give(held: HeldSlot): Promise<void> {
    if (held.generation !== this.generation || !this.client) return;
    const mine = this.holding.get(held.key);
    mine?.delete(held.slot);
    if (mine && mine.size === 0) this.holding.delete(held.key);
    try {
      await this.timed(this.client.query('select pg_advisory_unlock(hashtext($1), $2)', [held.key, held.slot]));
    } catch {
      this.drop();
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.drop();
    await client?.end().catch(() => {});
  }

  private async session(): Promise<{ client: pg.Client; generation: number }> {
    if (this.closed) throw new Error('closed');
    if (this.client) return { client: this.client, generation: this.generation };
    this.connecting ??= (async () => {
      const client = new pg.Client({
        connectionString: this.connectionString, application_name: 'billing-worker-slots',
        connectionTimeoutMillis: this.timeoutMs, keepAlive: true,
      });
      // A lost connection surfaces here too: the session's locks are gone with it.
      client.on('error', () => { if (this.client === client) this.drop(); });
      client.on('end', () => { if (this.client === client) this.drop(); });
      try {
        await client.connect();
      } catch (err) {
        client.end().catch(() => {});
        throw err;
      }
      return client;
    })().finally(() => { this.connecting = null; });
    const client = await this.connecting;
    if (this.closed) {
      await client.end().catch(() => {});
      throw new Error('closed');
    }
    this.client = client;
    return { client, generation: this.generation };
  }

  /** Forgets the session: its locks are (or will be, when the server notices) released. */
  private drop(): void {
    const client = this.client;
    this.client = null;
    this.generation += 1;
    this.holding = new Map();
    // A session that answered too slowly may still hold locks: end it so that they go.
    if (client) (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
  }

  private timed<T>(query: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('endpoint slot query timed out')), this.timeoutMs);
    });
    return Promise.race([query, timeout]).finally(() => clearTimeout(timer));
  }
}
