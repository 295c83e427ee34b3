/**
 * `chronos mcp`: the MCP server over stdio for one owner (CHRONOS_API_KEY or CHRONOS_OWNER_DID).
 * It lives in src/mcp/command.ts; see docs/mcp.md.
 */
import { MCP_USAGE, runMcpCommand } from '../../mcp/command.js';
import type { Command } from '../io.js';

export const mcpCommand: Command = {
  name: 'mcp',
  summary: 'MCP server over stdio for one owner (CHRONOS_API_KEY or CHRONOS_OWNER_DID)',
  usage: MCP_USAGE,
  run: (args, io) => runMcpCommand(args, io),
};
