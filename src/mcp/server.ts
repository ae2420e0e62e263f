// One MCP server per HTTP request (stateless), built with the v2 SDK's McpServer:
// each tool of the table is registered with registerTool; a call runs the tool's
// registry operation through Executor.run with the request's caller, exactly as the
// REST route would. The same factory serves both protocol eras (2026-07-28 and the
// 2025 initialize handshake); see index.ts.
import {
  CallToolResult, McpServer, ProtocolError, ProtocolErrorCode, StandardSchemaWithJSON, Tool,
} from '@modelcontextprotocol/server';
import { z } from 'zod';
import { API_VERSION } from '../core/api-version';
import { ApiError, problemJsonSchema, resolveProblemType } from '../core/errors';
import type { Operation } from '../domain/operation';
import { findOperation } from '../operations';
import { log } from '../core/log';
import { Caller, Executor, Outcome, problemOutcome, RateLimitInfo, unavailableOutcome, validationError } from '../operations/executor';
import { findTool, ToolDef, tools } from './tools';

export const SERVER_INFO = { name: 'community-billing', version: API_VERSION };

const INSTRUCTIONS = 'Tools over one community\'s billing data: the community is the one your API key belongs to. '
  + 'Results are the same JSON objects as the REST API (/v1). Lists are newest first and paginate with cursor/next_cursor. '
  + 'A tool error carries a problem object: branch on its code (missing_scope names the scope your key lacks; '
  + 'invalid_request names the field in param).';

type Json = Record<string, unknown>;

/** Drops every `additionalProperties: false`: a result may gain fields (the spec's additive changes). */
function open(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(open);
  if (schema === null || typeof schema !== 'object') return schema;
  const out: Json = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'additionalProperties' && value === false) continue;
    out[key] = open(value);
  }
  return out;
}

/**
 * What a tool's structuredContent holds: its operation's response (the zod schema
 * REST's OpenAPI document also describes) or, in an error result (isError), the
 * problem object. Both are listed because clients validate structuredContent against
 * this schema whether or not the result is an error (the v1 TypeScript SDK does).
 * Self-contained (no $ref) and open to fields added later. See
 * docs/decisions/mcp-tool-annotations.md.
 */
export function outputSchemaOf(tool: ToolDef): Json {
  const response = findOperation(tool.operation)?.response;
  if (!response) throw new Error(`MCP tools: operation ${tool.operation} has no response schema`);
  const { $schema: _ignored, ...result } = z.toJSONSchema(response, { io: 'output', unrepresentable: 'any' }) as Json;
  if (result.type !== 'object') throw new Error(`MCP tools: ${tool.name} answers a non-object (${String(result.type)})`);
  return {
    type: 'object',
    description: 'The result: the same JSON object as the REST operation answers. In an error result (isError true), the problem object instead.',
    anyOf: [open(result), problemJsonSchema()],
  };
}

/** The tools/list entry of a tool: JSON Schema from its zod input and output, scope from its operation. */
export function describeTool(tool: ToolDef): Tool {
  const { $schema: _ignored, ...schema } = z.toJSONSchema(tool.input, { io: 'input' }) as Json;
  const scope = findOperation(tool.operation)?.scope;
  return {
    name: tool.name,
    title: tool.title,
    description: scope ? `${tool.description} Requires the API key scope ${scope}.` : tool.description,
    inputSchema: schema as Tool['inputSchema'],
    outputSchema: outputSchemaOf(tool) as Tool['outputSchema'],
    annotations: { title: tool.title, ...tool.annotations },
  };
}

/**
 * What one HTTP request has learnt about its caller. A single tools/call request
 * authenticates inside its tool call (one rate token for the whole request); if
 * that authentication refuses the key, the HTTP adapter answers the refusal
 * (401/429 problem+json) instead of the protocol's response.
 */
export interface RequestAuth {
  caller: Caller;
  authenticated: boolean;
  rateLimit?: RateLimitInfo;
  refusal?: Outcome;
  /** Why a tool failed (the database unreachable), for the request's access log line. */
  cause?: string;
}

function isRefusal(outcome: Outcome): boolean {
  return outcome.problem && (outcome.status === 401 || outcome.status === 429);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * Same JSON as REST, as text for any client and as structuredContent for those that
 * read it; a problem's type made absolute against `base` (as REST sends it).
 */
export function toolResult(outcome: Outcome, base?: string): CallToolResult {
  const body = outcome.problem ? resolveProblemType(outcome.body ?? null, base) : outcome.body ?? null;
  const result: CallToolResult = { content: [{ type: 'text', text: JSON.stringify(body) }] };
  if (isRecord(body)) result.structuredContent = body;
  if (outcome.problem) result.isError = true;
  return result;
}

/** Rewrites an operation's problem so `param` (and the detail's quoted field) use the tool's names. */
function inToolTerms(outcome: Outcome, tool: ToolDef, pathNames: Record<string, string>): Outcome {
  if (!outcome.problem || !isRecord(outcome.body) || typeof outcome.body.param !== 'string') return outcome;
  const param = outcome.body.param;
  const renamed = tool.fieldNames?.[param] ?? pathNames[param];
  if (!renamed) return outcome;
  const detail = typeof outcome.body.detail === 'string'
    ? outcome.body.detail.split(`"${param}"`).join(`"${renamed}"`).split(`Invalid ${param}:`).join(`Invalid ${renamed}:`)
    : outcome.body.detail;
  return { ...outcome, body: { ...outcome.body, param: renamed, detail } };
}

function pathPlaceholders(op: Operation): string[] {
  return [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
}

export class ToolRunner {
  constructor(private readonly executor: Executor) {}

  /** Records an authenticating call's result; a refusal before any success refuses the request. */
  private note(auth: RequestAuth, outcome: Outcome | RateLimitInfo): Outcome | null {
    if ('status' in outcome && outcome.cause) auth.cause = outcome.cause;
    if ('status' in outcome && isRefusal(outcome)) {
      if (!auth.authenticated) auth.refusal ??= outcome;
      return outcome;
    }
    auth.authenticated = true;
    auth.rateLimit = 'status' in outcome ? outcome.rateLimit ?? auth.rateLimit : outcome;
    return 'status' in outcome ? outcome : null;
  }

  /** Authenticates (and checks the scope) without running anything, then reports `error`. */
  private async refuse(auth: RequestAuth, scope: string | null, error: ApiError): Promise<Outcome> {
    if (scope === null && auth.authenticated) {
      return { status: error.status, body: error.toProblem(), problem: true, rateLimit: auth.rateLimit };
    }
    const checked = this.note(auth, await this.executor.authenticateOnly(auth.caller, scope));
    return checked ?? { status: error.status, body: error.toProblem(), problem: true, rateLimit: auth.rateLimit };
  }

  /** The base URL of the request's links and problem types. */
  baseUrl(auth: RequestAuth): string {
    return this.executor.baseUrlFor(auth.caller);
  }

  async call(auth: RequestAuth, name: string, args: unknown): Promise<CallToolResult> {
    const base = this.baseUrl(auth);
    const result = (outcome: Outcome) => toolResult(outcome, base);
    const tool = findTool(name);
    if (!tool) {
      await this.refuse(auth, null, new ApiError('not_found', 'unknown tool'));
      if (auth.refusal) return result(auth.refusal);
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${name}. Call tools/list for the available tools.`);
    }
    const op = findOperation(tool.operation);
    if (!op) {
      return result(await this.refuse(auth, null,
        new ApiError('service_unavailable', `The tool ${name} has no operation on this server.`)));
    }
    const parsed = tool.input.safeParse(args ?? {});
    if (!parsed.success) {
      return result(await this.refuse(auth, op.scope, validationError(parsed.error, 'body')));
    }
    const placeholders = pathPlaceholders(op);
    const pathFields = tool.path ?? [];
    let request;
    try {
      request = tool.map?.(parsed.data) ?? {};
    } catch (err) {
      // The identity-pair rule (src/domain/members/member-schema.ts) names the field to fix.
      if (!(err instanceof ApiError) || err.code !== 'invalid_request') throw err;
      return result(await this.refuse(auth, op.scope, err));
    }
    const params = Object.fromEntries(placeholders.map((p, i) => [p, parsed.data[pathFields[i]]]));
    const outcome = await this.executor.run(op, auth.caller, { params, query: request.query, body: request.body });
    this.note(auth, outcome);
    const pathNames = Object.fromEntries(placeholders.map((p, i) => [p, pathFields[i]]));
    return result(inToolTerms(outcome, tool, pathNames));
  }
}

/**
 * An advertised schema of a tool (input or output), as a Standard Schema that accepts
 * any value. registerTool needs a schema for tools/list; validation must stay with
 * the tool runner, which checks the key and the scope first and answers a bad input
 * as REST's 422 problem naming the field (the SDK's own validation would answer a
 * bare message before the scope check). Results are REST's own answers, which the
 * OpenAPI document describes and the suite checks; they are not validated again here.
 */
function advertised(schema: Json): StandardSchemaWithJSON<Record<string, unknown>> {
  return {
    '~standard': {
      version: 1,
      vendor: 'community-billing',
      validate: (value: unknown) => ({ value: value as Record<string, unknown> }),
      jsonSchema: { input: () => schema, output: () => schema },
    },
  };
}

export interface ListedTool {
  tool: Tool;
  schema: StandardSchemaWithJSON<Record<string, unknown>>;
  output: StandardSchemaWithJSON<Record<string, unknown>>;
}

/** A fresh server for one HTTP request, its tools registered from the table. */
export function createMcpServer(runner: ToolRunner, auth: RequestAuth, listed: ListedTool[]): McpServer {
  const server = new McpServer(SERVER_INFO, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS });
  for (const { tool, schema, output } of listed) {
    server.registerTool(tool.name, {
      title: tool.title,
      description: tool.description,
      inputSchema: schema,
      outputSchema: output,
      annotations: tool.annotations,
    }, async (args) => {
      try {
        return await runner.call(auth, tool.name, args);
      } catch (err) {
        // The database unreachable: REST's 503 problem (the access line logs it once).
        const unavailable = unavailableOutcome(err);
        if (unavailable) {
          auth.cause = unavailable.cause;
          return toolResult(unavailable, runner.baseUrl(auth));
        }
        // Never a database message in a result: log it, answer the REST 500 problem.
        log.error({ err, tool: tool.name }, 'unexpected error in an MCP tool');
        return toolResult(problemOutcome(new ApiError('internal_error', 'An unexpected error occurred.'), auth.rateLimit), runner.baseUrl(auth));
      }
    });
  }
  return server;
}

export function listTools(): ListedTool[] {
  return tools.map(describeTool).map((tool) => ({
    tool, schema: advertised(tool.inputSchema as Json), output: advertised(tool.outputSchema as Json),
  }));
}
