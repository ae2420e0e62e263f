// Discord signs every interaction it sends to an Interactions Endpoint URL with the
// application's Ed25519 key: X-Signature-Ed25519 (hex) over X-Signature-Timestamp followed
// by the raw body, checked against the application's public key (64 hex digits, the
// connection's settings.public_key). Node's own crypto verifies it; no package needed.
import crypto from 'node:crypto';

// An Ed25519 SubjectPublicKeyInfo is this fixed DER prefix followed by the raw 32 bytes.
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
const keys = new Map<string, crypto.KeyObject>();

function publicKey(hex: string): crypto.KeyObject | null {
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) return null;
  let key = keys.get(hex);
  if (!key) {
    try {
      key = crypto.createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, Buffer.from(hex, 'hex')]), format: 'der', type: 'spki' });
    } catch {
      return null; // 32 bytes that are not a point of the curve
    }
    if (keys.size >= 1000) keys.clear();
    keys.set(hex, key);
  }
  return key;
}

/** Whether the request carries Discord's valid signature of timestamp + body under publicKeyHex. */
export function discordSignatureValid(publicKeyHex: string | null, signatureHex: string | undefined, timestamp: string | undefined,
  rawBody: Buffer): boolean {
  if (!publicKeyHex || !signatureHex || !timestamp) return false;
  if (!/^[0-9a-fA-F]{128}$/.test(signatureHex)) return false;
  const key = publicKey(publicKeyHex);
  if (!key) return false;
  const message = Buffer.concat([Buffer.from(timestamp, 'utf8'), rawBody]);
  try {
    return crypto.verify(null, message, key, Buffer.from(signatureHex, 'hex'));
  } catch {
    return false;
  }
}
