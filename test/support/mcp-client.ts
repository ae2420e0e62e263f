// Test helpers: the SDK's own client over Streamable HTTP against the real app.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';

export async function connect(baseUrl: string, key: string | null, headers: Record<string, string> = {}): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL('/mcp', baseUrl), {
    requestInit: { headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers } },
  });
  const client = new Client({ name: 'billing-tests', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

export async function callTool(client: Client, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args })) as CallToolResult;
}

/** The JSON a tool answered, after checking that its text and structured forms agree. */
export function resultJson(result: CallToolResult): unknown {
  const text = result.content.find((c) => c.type === 'text');
  if (!text || text.type !== 'text') throw new Error(`tool result without text content: ${JSON.stringify(result)}`);
  const parsed: unknown = JSON.parse(text.text);
  if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) {
    expect(result.structuredContent).toEqual(parsed);
  }
  return parsed;
}

export const PROTOCOL_VERSION = '2025-06-18';

/** One raw JSON-RPC POST to /mcp, as any Streamable HTTP client sends it. */
export async function rpc(baseUrl: string, key: string | null, message: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(new URL('/mcp', baseUrl), {
    method: 'POST',
    headers: {
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
      'mcp-protocol-version': PROTOCOL_VERSION,
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...headers,
    },
    body: typeof message === 'string' ? message : JSON.stringify(message),
  });
  const text = await res.text();
  let body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  try { body = text ? JSON.parse(text) : undefined; } catch { body = undefined; }
  return { status: res.status, headers: res.headers, text, body };
}

export const initializeMessage = (id = 1) => ({
  jsonrpc: '2.0', id, method: 'initialize',
  params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

export const toolCallMessage = (name: string, args: Record<string, unknown> = {}, id = 2) => ({
  jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args },
});
