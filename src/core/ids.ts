// Ids and API keys as the service writes them.
import crypto from 'node:crypto';

/** billing.gen_id('prefix'): a prefix of 1 to 5 letters, '_', 26 hex digits (time-sortable). */
export const ID_PATTERN = /^[a-z]{1,5}_[0-9a-f]{26}$/;

/** Key format: bk_<8 char prefix>_<secret>; anything else is malformed. */
export const KEY_PATTERN = /^bk_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{20,100}$/;

/** Only this digest of a key is stored (billing_private.api_keys.key_hash). */
export function hashKey(key: string): string {
  // The one-shot digest (no Hash object per request): every API request hashes its key.
  return crypto.hash('sha256', key, 'hex');
}

/** A session token (cookie): an operator's bos_ or a member portal's bmp_, then 256 random bits (base64url). */
export const SESSION_TOKEN_PATTERN = /^(bos|bmp)_[A-Za-z0-9_-]{43}$/;
