// A request's cookies (no library: one header, split on ";"). Shared by the dashboard's
// sessions and the Connect Discord state.
import type { Request } from 'express';

export function cookies(req: Request): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i < 0) continue;
    const name = part.slice(0, i).trim();
    try { out[name] = decodeURIComponent(part.slice(i + 1).trim()); } catch { /* a malformed cookie is no cookie */ }
  }
  return out;
}
