// The MCP servers behind /mcp (src/mcp/index.ts mounts the route): the SDK's handler
// for 2026-07-28 requests and a stateless Streamable HTTP transport for 2025-era ones,
// over the tool runner. Loaded with the first MCP request, not at start: the SDK and
// the tools' schemas are about 0.4 s of require that a restart should not wait for
// (docs/decisions/compiled-build.md).
import {
  createMcpHandler, isLegacyRequest, McpRequestContext, WebStandardStreamableHTTPServerTransport,
} from '@modelcontextprotocol/server';
import type { Executor } from '../operations/executor';
import { createMcpServer, listTools, RequestAuth, ToolRunner } from './server';

/** The request's RequestAuth travels to the server factory in the SDK's pass-through authInfo. */
const REQUEST_AUTH = 'community-billing/request-auth';

function requestAuthOf(ctx: McpRequestContext): RequestAuth {
  const auth = ctx.authInfo?.extra?.[REQUEST_AUTH];
  if (!auth) throw new Error('MCP: a server was built without the request\'s caller');
  return auth as RequestAuth;
}

export interface McpEngine {
  /** The MCP answer to one POSTed request, of either protocol era. */
  respond(request: globalThis.Request, auth: RequestAuth): Promise<globalThis.Response>;
}

export function createMcpEngine(executor: Executor): McpEngine {
  const runner = new ToolRunner(executor);
  const listed = listTools();
  // Modern era only: 2025-era traffic is routed below (the SDK's own legacy fallback
  // would answer with SSE streams, and this endpoint answers JSON). The default
  // responseMode 'auto' answers one JSON body, as the tools emit nothing before their
  // result ('json' would say the same but warns at every start).
  const modern = createMcpHandler((ctx) => createMcpServer(runner, requestAuthOf(ctx), listed), {
    legacy: 'reject',
  });

  /** A 2025-era request: the initialize handshake and the calls after it, stateless. */
  async function serveLegacy(request: globalThis.Request, auth: RequestAuth): Promise<globalThis.Response> {
    const server = createMcpServer(runner, auth, listed);
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    try {
      await server.connect(transport);
      return await transport.handleRequest(request);
    } finally {
      await server.close();
    }
  }

  return {
    respond: async (request, auth) => ((await isLegacyRequest(request))
      ? serveLegacy(request, auth)
      : modern.fetch(request, { authInfo: { token: '', clientId: '', scopes: [], extra: { [REQUEST_AUTH]: auth } } })),
  };
}
