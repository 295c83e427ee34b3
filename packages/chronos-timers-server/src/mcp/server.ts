/**
 * The Chronos MCP server (contract §8) for one owner: an `McpServer` of the SDK with its nine
 * tools, over the same AlarmService and WakeService as the HTTP API — so the same validation,
 * quotas and owner scoping apply, and another owner's ids answer exactly like missing ones.
 *
 * One server serves one owner over one transport; transports build a fresh one per request
 * (Streamable HTTP) or per process (stdio) and never share it between clients.
 *
 * Every call answers a `CallToolResult`: structured content (the HTTP answer plus
 * `server_time`, read from the database clock) and the same JSON as text; or `isError` with a
 * text telling the model what to send instead. Bad arguments never become a protocol error.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { Owner } from 'chronos-timers/internal';
import { VERSION } from 'chronos-timers/internal';
import { isoTime } from 'chronos-timers/internal';
import type { RawPayloads } from './raw-payloads.js';
import { published } from './schemas.js';
import type { ChronosTool, McpService, ToolContext } from './tool.js';
import { answerResult, refusalResult } from './tool-result.js';
import { TOOLS } from './tools/index.js';

export type { McpService };

const INSTRUCTIONS = `Chronos is a durable timer: it wakes you (the agent) up later, even after this session has ended.
- schedule_alarm: be woken once (in_seconds from now, or at an RFC 3339 time with offset) or on a cron schedule in the user's IANA time zone. Write wake_message as instructions to your future self.
- When a wake arrives, do what its instructions and wake_message say, then call ack_wake with its wake_id and a short note; an unacknowledged wake is nudged, then escalated to a human. list_wakes (status "delivered") finds wakes still waiting for your ack, e.g. after a new session.
- list_alarms / get_alarm to look, reschedule_alarm to change, pause_alarm / resume_alarm to hold and restart, cancel_alarm to stop for good.
Every answer carries server_time (UTC, the database's clock, which decides when alarms are due): use it to work out relative times. next_fires shows coming fires in the alarm's zone: check them.`;

// Built once: the JSON Schema each tool publishes is computed at load, not per request.
const INPUTS = new Map(TOOLS.map((tool) => [tool, published(tool.input)]));

export interface McpServerOptions {
  /** Raw payload texts noted by the transport, so big numbers pass through exactly (I4). */
  rawPayloads?: RawPayloads;
  /** A sentence about this server for the model (which store it opened), after the instructions. */
  about?: string;
  /** The W3C traceparent of the HTTP request this server answers, or ''. */
  trace?: string;
}

/** A new MCP server acting for `owner`. Connect it to exactly one transport. */
export function createMcpServer(
  service: McpService,
  owner: Owner,
  options: McpServerOptions = {},
): McpServer {
  const server = new McpServer(
    { name: 'chronos', title: 'Chronos', version: VERSION },
    { instructions: options.about ? `${INSTRUCTIONS}\n${options.about}` : INSTRUCTIONS },
  );
  const logger = service.logger.child({ component: 'mcp' });
  for (const tool of TOOLS) {
    server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        inputSchema: INPUTS.get(tool)!,
        outputSchema: tool.output,
        annotations: { title: tool.title, ...tool.annotations },
      },
      async (args, extra): Promise<CallToolResult> => {
        const context: ToolContext = {
          service,
          owner,
          trace: options.trace ?? '',
          rawPayload: (parsed) =>
            parsed === undefined ? undefined : options.rawPayloads?.take(extra.requestId, parsed),
        };
        return call(tool, args, context, logger);
      },
    );
  }
  return server;
}

async function call(
  tool: ChronosTool,
  args: Record<string, unknown>,
  context: ToolContext,
  logger: McpService['logger'],
): Promise<CallToolResult> {
  const { dbClock } = context.service;
  // Read first too: a database that is away refuses the call before anything runs.
  let before: Date;
  try {
    before = await dbClock.now();
  } catch (error) {
    return refusalResult(tool.name, error, undefined, logger);
  }
  let answer: Record<string, unknown>;
  try {
    answer = await tool.run(args, context);
  } catch (error) {
    return refusalResult(tool.name, error, isoTime(before), logger);
  }
  // The clock is an estimate refreshed now and then, so this read rarely queries; if it fails,
  // the call has still happened, and the time before it is the best answer there is.
  const after = await dbClock.now().catch(() => before);
  return answerResult(answer, isoTime(after));
}
