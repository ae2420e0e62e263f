// A community's own payment provider credentials (Stripe: secret_key, webhook_secret),
// encrypted at rest like webhook signing secrets: AES-256-GCM under
// WEBHOOK_ENCRYPTION_KEY, bound to community and secret name (the GCM additional data),
// stored in billing_private.payment_secrets (owner only). They are written by the
// operator (`billing catalog apply`) and read back only to talk to the provider: never
// printed, logged or returned by any API.
import type pg from 'pg';
import { decryptSecret, encryptSecret, parseEncryptionKey } from '../../webhooks/crypto';

export const PAYMENT_SECRET_NAMES = ['secret_key', 'webhook_secret'] as const;
export type PaymentSecretName = (typeof PAYMENT_SECRET_NAMES)[number];

type Queryable = Pick<pg.PoolClient, 'query'>;

/** The GCM additional data's second half: one ciphertext decrypts only as this secret of this community. */
const slot = (provider: string, name: PaymentSecretName) => `payment:${provider}:${name}`;

export class PaymentSecretBox {
  private readonly key: Buffer;
  constructor(encryptionKey: string) {
    this.key = parseEncryptionKey(encryptionKey);
  }

  encrypt(communityId: string, provider: string, name: PaymentSecretName, secret: string): string {
    return encryptSecret(this.key, communityId, slot(provider, name), secret);
  }

  decrypt(communityId: string, provider: string, name: PaymentSecretName, ciphertext: string): string {
    return decryptSecret(this.key, communityId, slot(provider, name), ciphertext);
  }
}

/** The current community's stored ciphertext of one secret (billing_api or owner), or null. */
export async function paymentSecretCiphertext(db: { query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>> }, provider: string, name: PaymentSecretName): Promise<string | null> {
  const { rows } = await db.query<{ c: string | null }>('select billing_private.payment_secret_ciphertext($1, $2) as c', [provider, name]);
  return rows[0]?.c ?? null;
}

/**
 * Sets (a string) or removes (null) a community's secrets, as the owner role. A value
 * equal to the stored one writes nothing (applying the same catalog twice changes
 * nothing). Returns the names whose value changed.
 */
export async function storePaymentSecrets(db: Queryable, box: PaymentSecretBox | null, communityId: string, provider: string,
  secrets: Partial<Record<PaymentSecretName, string | null>>): Promise<PaymentSecretName[]> {
  const changed: PaymentSecretName[] = [];
  for (const name of PAYMENT_SECRET_NAMES) {
    const value = secrets[name];
    if (value === undefined) continue;
    const { rows } = await db.query<{ ciphertext: string }>(
      'select ciphertext from billing_private.payment_secrets where community_id = $1 and provider = $2 and name = $3',
      [communityId, provider, name]);
    const stored = rows[0]?.ciphertext ?? null;
    if (value === null) {
      if (stored === null) continue;
      await db.query('delete from billing_private.payment_secrets where community_id = $1 and provider = $2 and name = $3',
        [communityId, provider, name]);
      changed.push(name);
      continue;
    }
    if (!box) throw new Error('WEBHOOK_ENCRYPTION_KEY is needed to store payment secrets (they are encrypted with it)');
    if (stored !== null && sameSecret(box, communityId, provider, name, stored, value)) continue;
    await db.query(
      `insert into billing_private.payment_secrets (community_id, provider, name, ciphertext) values ($1, $2, $3, $4)
       on conflict (community_id, provider, name) do update set ciphertext = excluded.ciphertext, updated_at = now()`,
      [communityId, provider, name, box.encrypt(communityId, provider, name, value)]);
    changed.push(name);
  }
  return changed;
}

function sameSecret(box: PaymentSecretBox, communityId: string, provider: string, name: PaymentSecretName, ciphertext: string, value: string): boolean {
  try {
    return box.decrypt(communityId, provider, name, ciphertext) === value;
  } catch {
    return false; // encrypted under another key: replace it
  }
}
