// Issue 26 item 10: the README's MCP tool list is the server's. The block between the
// mcp-tools markers of README.md must equal the table rendered from tools/list (name,
// title, scope, annotations); on a mismatch the failure shows the block to paste.
import fs from 'node:fs';
import path from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { createTenant, startApp, TestApp } from '../support/app';
import { connect } from '../support/mcp-client';

const README = path.join(__dirname, '../../README.md');
const BEGIN = '<!-- mcp-tools:begin (generated from tools/list; test/mcp/readme-tools.test.ts checks it) -->';
const END = '<!-- mcp-tools:end -->';

let app: TestApp;
let client: Client;

beforeAll(async () => {
  app = await startApp();
  client = await connect(app.url, (await createTenant(app.owner)).key);
});
afterAll(async () => {
  await client?.close();
  await app?.close();
});

function effect(tool: Tool): string {
  const a = tool.annotations ?? {};
  if (a.readOnlyHint) return 'read-only';
  return [
    a.destructiveHint ? 'destructive' : 'additive',
    a.idempotentHint ? 'idempotent' : 'not idempotent',
    a.openWorldHint ? 'may reach the payment provider' : 'this service only',
  ].join(', ');
}

/** The README block for these tools, in the server's order. */
function renderToolTable(tools: Tool[]): string {
  const rows = tools.map((t) => {
    const scope = /Requires the API key scope ([\w:]+)\./.exec(t.description ?? '')?.[1] ?? '(any key)';
    return `| \`${t.name}\` | ${t.title} | \`${scope}\` | ${effect(t)} |`;
  });
  return [
    `The ${tools.length} tools, as \`tools/list\` describes them (each with an input and an output schema):`,
    '',
    '| Tool | Does | Scope | Effect |',
    '|---|---|---|---|',
    ...rows,
  ].join('\n');
}

test('the README lists exactly the tools the server lists, with their scopes and annotations', async () => {
  const tools = (await client.listTools()).tools;
  const text = fs.readFileSync(README, 'utf8');
  const begin = text.indexOf(BEGIN);
  const end = text.indexOf(END);
  expect({ begin: begin >= 0, end: end > begin }).toEqual({ begin: true, end: true });
  const block = text.slice(begin + BEGIN.length, end).trim();
  const expected = renderToolTable(tools);
  if (block !== expected) throw new Error(`README.md's MCP tool block is stale; replace it with:\n\n${expected}\n`);
  // The prose around it names no other count.
  expect(text).not.toMatch(/The \d+ tools \(/);
});
