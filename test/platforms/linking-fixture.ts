// Shared by the identity-linking tests (discord-interactions, telegram-updates): a sandbox
// community with the example catalog whose platforms are a Discord server (with the
// application's public key) and a Telegram chat (with its bot token), members, link codes.
import crypto from 'node:crypto';
import { applyCatalog } from '../../src/domain/catalog/catalog-file';
import { call, createTenant, TestApp } from '../support/app';
import { catalog, checkout, externalSubject, Shop } from '../support/shop';

export const ENCRYPTION_KEY = crypto.randomBytes(32).toString('base64');

export interface Ed25519Pair { publicKeyHex: string; privateKey: crypto.KeyObject }

export function ed25519Pair(): Ed25519Pair {
  const { publicKey, privateKey } = crypto.generateKeyPairSync('ed25519');
  const x = publicKey.export({ format: 'jwk' }).x!;
  return { publicKeyHex: Buffer.from(x, 'base64url').toString('hex'), privateKey };
}

export interface LinkShop extends Shop { discordId: string; telegramId: string }

export async function createLinkShop(app: TestApp, opts: { publicKeyHex?: string; telegramToken?: string } = {}): Promise<LinkShop> {
  const tenant = await createTenant(app.owner);
  const ids = await applyCatalog(app.owner, tenant.communityId, catalog({ type: 'sandbox' }, {
    platforms: [
      { key: 'discord-main', platform: 'discord', name: 'Main server',
        settings: { guild_id: '1234', ...(opts.publicKeyHex ? { public_key: opts.publicKeyHex } : {}) } },
      { key: 'tg', platform: 'telegram', name: 'Announcements',
        settings: { chat_id: '-1001234567890', ...(opts.telegramToken ? { bot_token: opts.telegramToken } : {}) } },
    ],
  }), { encryptionKey: ENCRYPTION_KEY });
  return { ...tenant, ids, discordId: ids.platforms['discord-main'], telegramId: ids.platforms.tg };
}

export async function newMember(app: TestApp, shop: Shop): Promise<string> {
  const r = await checkout(app, shop, { tier_id: shop.ids.tiers.silver, subject: externalSubject() });
  if (r.status !== 200) throw new Error(`checkout failed: ${r.text}`);
  return r.body.member_id;
}

export async function linkCode(app: TestApp, shop: Shop, memberId: string, platform: 'discord' | 'telegram'): Promise<string> {
  const r = await call(app.url, 'POST', `/v1/members/${memberId}/link-codes`, { key: shop.key, body: { intended_platform: platform } });
  if (r.status !== 200) throw new Error(`link code failed: ${r.text}`);
  return r.body.code;
}

export async function identities(app: TestApp, communityId: string) {
  const { rows } = await app.owner.query<{ member_id: string; platform: string; platform_uid: string; username: string | null }>(
    'select member_id, platform, platform_uid, username from billing.member_identities where community_id = $1 order by created_at',
    [communityId]);
  return rows;
}

/** A raw POST to the service (these routes are outside /v1 and its OpenAPI document). */
export async function post(app: TestApp, path: string, body: string | Buffer, headers: Record<string, string> = {}) {
  const res = await fetch(app.url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : new Uint8Array(body) });
  const text = await res.text();
  let json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  try { json = text ? JSON.parse(text) : undefined; } catch { json = undefined; }
  return { status: res.status, contentType: res.headers.get('content-type'), body: json, text };
}
