// The deployment's secret-box key (WEBHOOK_ENCRYPTION_KEY): it encrypts webhook signing
// secrets and communities' payment provider secrets. Without the variable, a key is
// generated once into <dataDir>/webhook-encryption.key, beside the embedded database,
// so `npm start` and the operator CLI on the same machine share it.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../core/config';

export function resolveEncryptionKey(config: Pick<Config, 'webhookEncryptionKey' | 'dataDir'>, log: (line: string) => void): string {
  if (config.webhookEncryptionKey) return config.webhookEncryptionKey;
  const file = path.join(config.dataDir, 'webhook-encryption.key');
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  fs.mkdirSync(config.dataDir, { recursive: true });
  const key = crypto.randomBytes(32).toString('base64');
  try {
    fs.writeFileSync(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
  } catch (err) {
    // Another process wrote it first: use theirs.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return fs.readFileSync(file, 'utf8').trim();
    throw err;
  }
  log(`Generated a webhook encryption key in ${file} (set WEBHOOK_ENCRYPTION_KEY to use your own).`);
  return key;
}
