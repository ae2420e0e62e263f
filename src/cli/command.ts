// What a command group looks like to the dispatcher (src/cli/index.ts), and the
// context a command runs with: config, a lazily opened database, stderr logging.
import crypto from 'node:crypto';
import type pg from 'pg';
import type { Config } from '../core/config';
import { Database, openDatabase } from '../db/database';
import { ensureLogin } from '../db/logins';
import { createApiPool, createOwnerPool } from '../db/pool';

export type OptionSpec = { type: 'string'; required?: boolean; description: string; /** placeholder in usage */ value?: string } | { type: 'boolean'; description: string };

export interface Command<R = unknown> {
  /** Subcommand name; '' for a group that is itself the command (`billing migrate`). */
  name: string;
  summary: string;
  /** Positional arguments, in order; all required. */
  args?: string[];
  options?: Record<string, OptionSpec>;
  run(ctx: CliContext, input: CommandInput): Promise<R>;
  /** Human-readable output (without --json); JSON is printed when absent. */
  print?(result: R): string;
}

export interface CommandInput {
  args: string[];
  options: Record<string, string | boolean | undefined>;
}

export interface CommandGroup {
  name: string;
  summary: string;
  commands: Command[];
}

/** A usage mistake: exit code 2 and the command's usage line. */
export class UsageError extends Error {}

export function defineGroup(group: CommandGroup): CommandGroup {
  return group;
}

export function defineCommand<R>(command: Command<R>): Command {
  return command as Command;
}

export function requireString(input: CommandInput, name: string): string {
  const value = input.options[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

export function positiveInteger(value: string, name: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new UsageError(`${name}: expected a positive integer, got "${value}"`);
  return n;
}

export class CliContext {
  private database: Database | null = null;
  private pools: pg.Pool[] = [];
  private owner: pg.Pool | null = null;
  private api: pg.Pool | null = null;

  /** This run's id: the audit log records it (app.request_id) with each change the command makes. */
  readonly requestId = crypto.randomUUID();

  /**
   * actor: the command ("catalog apply"), which the audit log records as who made each
   * change of this run (app.actor; db/migrations/fixtures/functions/12-audit.sql).
   */
  constructor(readonly config: Config, readonly log: (line: string) => void, readonly actor = 'cli') {}

  /** DATABASE_URL, or the embedded database of npm start (started if it is not running). */
  async databaseUrl(): Promise<string> {
    if (!this.database) this.database = await openDatabase(this.config, this.log);
    return this.database.url;
  }

  /** A pool as the owner role (sees every community; runs migrations). */
  async ownerPool(): Promise<pg.Pool> {
    if (!this.owner) {
      this.owner = createOwnerPool(await this.databaseUrl(), 2, undefined,
        { 'app.actor': this.actor, 'app.request_id': this.requestId });
      this.pools.push(this.owner);
    }
    return this.owner;
  }

  /** A pool as billing_api through the app login (RLS applies; set app.community_id per transaction). */
  async apiPool(): Promise<pg.Pool> {
    if (!this.api) {
      this.api = createApiPool(this.config.appDatabaseUrl ?? await ensureLogin(await this.databaseUrl(), 'billing_app'), 2,
        undefined, this.config.databasePooler);
      this.pools.push(this.api);
    }
    return this.api;
  }

  async close(): Promise<void> {
    for (const pool of this.pools) await pool.end().catch(() => {});
    this.pools = [];
    if (this.database) await this.database.stop().catch((err) => this.log(`stopping the embedded PostgreSQL: ${(err as Error).message}`));
    this.database = null;
  }
}
