// A platform connection's bot token (Discord, Telegram: issue 29), encrypted at rest
// like payment provider secrets: AES-256-GCM under WEBHOOK_ENCRYPTION_KEY, bound to the
// community and the connection (the GCM additional data), stored in
// billing_private.platform_secrets (owner only). Written by `billing catalog apply`,
// read back only to call the platform: never printed, logged or returned by any API,
// and never sent to the database in clear (not even to be checked).
import type pg from 'pg';
import { decryptSecret, encryptSecret, parseEncryptionKey } from '../../webhooks/crypto';

export const PLATFORM_SECRET_NAMES = ['bot_token', 'client_secret'] as const;
export type PlatformSecretName = (typeof PLATFORM_SECRET_NAMES)[number];

type Queryable = Pick<pg.PoolClient, 'query'>;

/** The GCM additional data's second half: a ciphertext decrypts only as this secret of this connection. */
const slot = (platformConfigId: string, name: PlatformSecretName) => `platform:${platformConfigId}:${name}`;

export class PlatformSecretBox {
  private readonly key: Buffer;
  constructor(encryptionKey: string) {
    this.key = parseEncryptionKey(encryptionKey);
  }

  encrypt(communityId: string, platformConfigId: string, name: PlatformSecretName, secret: string): string {
    return encryptSecret(this.key, communityId, slot(platformConfigId, name), secret);
  }

  decrypt(communityId: string, platformConfigId: string, name: PlatformSecretName, ciphertext: string): string {
    return decryptSecret(this.key, communityId, slot(platformConfigId, name), ciphertext);
  }
}

/** The current community's stored ciphertext of a connection's secret (billing_api or owner), or null. */
export async function platformSecretCiphertext(db: { query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>> },
  platformConfigId: string, name: PlatformSecretName = 'bot_token'): Promise<string | null> {
  const { rows } = await db.query<{ c: string | null }>('select billing_private.platform_secret_ciphertext($1, $2) as c', [platformConfigId, name]);
  return rows[0]?.c ?? null;
}

/**
 * Sets (a string) or removes (null) a connection's secret, as the owner role; undefined
 * leaves it as it is (the token is write-only: a file without it keeps the stored one).
 * A value equal to the stored one writes nothing. True when it changed.
 */
export async function storePlatformSecret(db: Queryable, box: PlatformSecretBox | null, communityId: string, platformConfigId: string,
  name: PlatformSecretName, value: string | null | undefined): Promise<boolean> {
  if (value === undefined) return false;
  const { rows } = await db.query<{ ciphertext: string }>(
    'select ciphertext from billing_private.platform_secrets where community_id = $1 and platform_config_id = $2 and name = $3',
    [communityId, platformConfigId, name]);
  const stored = rows[0]?.ciphertext ?? null;
  if (value === null) {
    if (stored === null) return false;
    await db.query('delete from billing_private.platform_secrets where community_id = $1 and platform_config_id = $2 and name = $3',
      [communityId, platformConfigId, name]);
    return true;
  }
  if (!box) throw new Error('WEBHOOK_ENCRYPTION_KEY is needed to store bot tokens (they are encrypted with it)');
  if (stored !== null && sameSecret(box, communityId, platformConfigId, name, stored, value)) return false;
  await db.query(
    `insert into billing_private.platform_secrets (community_id, platform_config_id, name, ciphertext) values ($1, $2, $3, $4)
     on conflict (community_id, platform_config_id, name) do update set ciphertext = excluded.ciphertext, updated_at = now()`,
    [communityId, platformConfigId, name, box.encrypt(communityId, platformConfigId, name, value)]);
  return true;
}

function sameSecret(box: PlatformSecretBox, communityId: string, platformConfigId: string, name: PlatformSecretName, ciphertext: string, value: string): boolean {
  try {
    return box.decrypt(communityId, platformConfigId, name, ciphertext) === value;
  } catch {
    return false; // encrypted under another key: replace it
  }
}

/** A transaction whose community is set (billing.current_community_id()). */
export interface PlatformReader {
  communityId: string;
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

/**
 * The bot token a connection acts with: its own (decrypted), else the deployment's
 * (DISCORD_BOT_TOKEN, TELEGRAM_BOT_TOKEN), else null. A token that cannot be decrypted
 * (no key, or another key than the one that wrote it) throws, naming the cause and
 * never the token.
 */
export class PlatformTokens {
  private readonly box: PlatformSecretBox | null;
  private readonly cache = new Map<string, { ciphertext: string; token: string }>();

  constructor(encryptionKey: string | null, private readonly defaults: { discord: string | null; telegram: string | null }) {
    let box: PlatformSecretBox | null = null;
    try {
      box = encryptionKey ? new PlatformSecretBox(encryptionKey) : null;
    } catch {
      box = null; // a malformed key: stored tokens cannot be read (reported when one is needed)
    }
    this.box = box;
  }

  async botToken(ctx: PlatformReader, platformConfigId: string, platform: 'discord' | 'telegram'): Promise<string | null> {
    const ciphertext = await platformSecretCiphertext(ctx, platformConfigId, 'bot_token');
    if (!ciphertext) return this.defaults[platform];
    const slotKey = `${ctx.communityId}/${platformConfigId}`;
    const hit = this.cache.get(slotKey);
    if (hit?.ciphertext === ciphertext) return hit.token;
    if (!this.box) throw new Error(`platform connection ${platformConfigId}: its bot token is stored encrypted and this deployment has no valid WEBHOOK_ENCRYPTION_KEY to read it`);
    let token: string;
    try {
      token = this.box.decrypt(ctx.communityId, platformConfigId, 'bot_token', ciphertext);
    } catch {
      throw new Error(`platform connection ${platformConfigId}: its bot token was encrypted with another WEBHOOK_ENCRYPTION_KEY than this deployment's: apply it again`);
    }
    if (this.cache.size >= 1000) this.cache.clear();
    this.cache.set(slotKey, { ciphertext, token });
    return token;
  }
}
