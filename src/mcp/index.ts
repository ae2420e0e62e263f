// The MCP tool endpoint (/mcp) over the operations registry. Owned by the MCP work.
import type express from 'express';
import type { Executor } from '../operations/execute';

export function mountMcp(_app: express.Express, _executor: Executor): void {}
