// The MCP tool endpoint (/mcp), on the v2 SDK (@modelcontextprotocol/server):
// stateless (a new server per HTTP request, JSON responses, no sessions), over the
// operations registry. Authentication, rate limiting, tenant and scope are the
// executor's, exactly as for REST. Two protocol eras share one server factory:
// 2026-07-28 requests (per-request `_meta` envelope, server/discover) go to the SDK's
// createMcpHandler; 2025-era requests (initialize handshake, up to 2025-11-25) go to
// a stateless Streamable HTTP transport with JSON responses, as before. See
// docs/decisions/mcp-stateless-endpoint.md.
import express, { Request, Response } from 'express';
import { API_VERSION } from '../core/api-version';
import { Executor, Outcome, RateLimitInfo } from '../operations/executor';
import { callerOf, sendOutcome } from '../web/express-io';
import { verifyJsonDepth } from '../web/json-body';
import type { McpEngine } from './mcp-engine';
import type { RequestAuth } from './server';

export const MCP_PATH = '/mcp';
/**
 * As /v1: a larger body, or one nesting deeper than MAX_JSON_DEPTH, is refused by the
 * app's error handler (413 payload_too_large, 400 invalid_request).
 */
const MAX_BODY = '100kb';
const HOP_BY_HOP = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'upgrade']);

function setRateHeaders(res: Response, rl: RateLimitInfo | undefined) {
  res.setHeader('Api-Version', API_VERSION);
  if (!rl) return;
  res.setHeader('RateLimit-Limit', String(rl.limit));
  res.setHeader('RateLimit-Remaining', String(rl.remaining));
  res.setHeader('RateLimit-Reset', String(rl.reset));
}

/**
 * A POST holding exactly one tools/call request authenticates inside the tool call
 * (one rate token, as its REST twin). Anything else authenticates up front.
 */
function isSingleToolCall(text: string): boolean {
  try {
    const msg: unknown = JSON.parse(text);
    return msg !== null && typeof msg === 'object' && !Array.isArray(msg)
      && (msg as { method?: unknown }).method === 'tools/call' && (msg as { id?: unknown }).id !== undefined;
  } catch {
    return false;
  }
}

function toWebRequest(req: Request, body: string): globalThis.Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name)) continue;
    headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  return new globalThis.Request(`${req.protocol}://${req.get('host')}${req.originalUrl}`, { method: 'POST', headers, body });
}

async function sendWebResponse(res: Response, response: globalThis.Response, rl: RateLimitInfo | undefined, cause?: string) {
  setRateHeaders(res, rl);
  // A tool that met a database outage: its access line names the cause (src/web/observe.ts).
  if (cause) res.locals.cause = cause;
  response.headers.forEach((value, name) => res.setHeader(name, value));
  res.status(response.status);
  res.end(Buffer.from(await response.arrayBuffer()));
}

export function mountMcp(app: express.Express, executor: Executor): void {
  // The SDK and the tools load with the first MCP request (mcp-engine.ts).
  let loaded: McpEngine | null = null;
  const engine = () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    loaded ??= (require('./mcp-engine') as typeof import('./mcp-engine')).createMcpEngine(executor);
    return loaded;
  };

  /** Authenticates the request unless a tool call already did; a refusal is answered here. */
  async function settle(res: Response, auth: RequestAuth): Promise<boolean> {
    if (!auth.refusal && !auth.authenticated) {
      const checked: Outcome | RateLimitInfo = await executor.authenticateOnly(auth.caller, null);
      if ('status' in checked) auth.refusal = checked;
      else { auth.authenticated = true; auth.rateLimit = checked; }
    }
    if (auth.refusal) {
      sendOutcome(res, auth.refusal);
      return false;
    }
    return true;
  }

  app.post(MCP_PATH, express.raw({ type: () => true, limit: MAX_BODY, verify: verifyJsonDepth }), async (req, res, next) => {
    try {
      const text = Buffer.isBuffer(req.body) ? req.body.toString('utf8') : '';
      const auth: RequestAuth = { caller: callerOf(req), authenticated: false };
      if (!isSingleToolCall(text) && !(await settle(res, auth))) return;
      const request = toWebRequest(req, text);
      const response = await engine().respond(request, auth);
      // The transport may have answered without reaching the tool (bad headers, bad JSON-RPC).
      if (!(await settle(res, auth))) return;
      await sendWebResponse(res, response, auth.rateLimit, auth.cause);
    } catch (err) {
      next(err);
    }
  });

  // Stateless: no server-initiated stream to open (GET) and no session to end (DELETE).
  const notAllowed = async (req: Request, res: Response, next: express.NextFunction) => {
    try {
      const auth: RequestAuth = { caller: callerOf(req), authenticated: false };
      if (!(await settle(res, auth))) return;
      setRateHeaders(res, auth.rateLimit);
      res.status(405).setHeader('Allow', 'POST');
      res.json({ jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this MCP endpoint is stateless; send JSON-RPC messages with POST.' }, id: null });
    } catch (err) {
      next(err);
    }
  };
  app.get(MCP_PATH, notAllowed);
  app.delete(MCP_PATH, notAllowed);
}
