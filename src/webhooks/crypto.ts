// Signing secrets: generated here, encrypted at rest with AES-256-GCM under
// WEBHOOK_ENCRYPTION_KEY (32 bytes, written as 64 hex digits or as base64), bound to
// their endpoint (community id and endpoint id are the GCM additional data, so a
// ciphertext copied onto another endpoint does not decrypt). The key never reaches
// the database.
import crypto from 'node:crypto';

export const SECRET_PREFIX = 'whsec_';
/** Random bytes in a signing secret (Standard Webhooks asks for 24 to 64). */
export const SECRET_BYTES = 32;
const CIPHER_VERSION = 'v1';

/** Parses WEBHOOK_ENCRYPTION_KEY: 64 hex digits, or base64/base64url of exactly 32 bytes. */
export function parseEncryptionKey(text: string): Buffer {
  const trimmed = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Buffer.from(trimmed, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed)) {
    const key = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (key.length === 32) return key;
  }
  throw new Error('WEBHOOK_ENCRYPTION_KEY must be 32 bytes written as 64 hex digits or as base64 (44 characters)');
}

/** A fresh key in the documented format (base64), e.g. for `npm start` to write once. */
export function generateEncryptionKey(): string {
  return crypto.randomBytes(32).toString('base64');
}

export function generateSecret(): string {
  return SECRET_PREFIX + crypto.randomBytes(SECRET_BYTES).toString('base64');
}

/** The HMAC key of a whsec_ secret: the base64-decoded part after the prefix. */
export function secretKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

function aad(communityId: string, endpointId: string): Buffer {
  return Buffer.from(`${communityId}/${endpointId}`, 'utf8');
}

/** v1:<base64 of 12-byte iv | 16-byte tag | ciphertext>. */
export function encryptSecret(key: Buffer, communityId: string, endpointId: string, secret: string): string {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad(communityId, endpointId));
  const body = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return `${CIPHER_VERSION}:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
}

export function decryptSecret(key: Buffer, communityId: string, endpointId: string, ciphertext: string): string {
  const [version, data] = ciphertext.split(':', 2);
  if (version !== CIPHER_VERSION || !data) throw new Error('unknown webhook secret ciphertext format');
  const raw = Buffer.from(data, 'base64');
  const decipher = crypto.createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
  decipher.setAAD(aad(communityId, endpointId));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}

/**
 * Decrypts with a small cache: the worker signs many deliveries per endpoint, and a
 * ciphertext (random iv) identifies one secret of one endpoint.
 */
export class SecretBox {
  private readonly cache = new Map<string, Buffer>();
  constructor(private readonly key: Buffer) {}

  /** The HMAC key for a stored ciphertext. */
  hmacKey(communityId: string, endpointId: string, ciphertext: string): Buffer {
    const cacheKey = `${communityId}/${endpointId}/${ciphertext}`;
    let hit = this.cache.get(cacheKey);
    if (!hit) {
      hit = secretKey(decryptSecret(this.key, communityId, endpointId, ciphertext));
      if (this.cache.size >= 10_000) this.cache.clear();
      this.cache.set(cacheKey, hit);
    }
    return hit;
  }

  encrypt(communityId: string, endpointId: string, secret: string): string {
    return encryptSecret(this.key, communityId, endpointId, secret);
  }

  decrypt(communityId: string, endpointId: string, ciphertext: string): string {
    return decryptSecret(this.key, communityId, endpointId, ciphertext);
  }
}
