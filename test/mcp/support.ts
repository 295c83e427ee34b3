/**
 * MCP through the SDK's own Client: the API app on a real socket (`listen({port: 0})`) reached
 * with `StreamableHTTPClientTransport`, and `chronos mcp` spawned as a child reached with
 * `StdioClientTransport`. Owners, keys and fires come from a ChronosService on the test's
 * database, so a wake is made by backdating a row and running the dispatcher once.
 */
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { expect } from 'vitest';
import { loadConfig } from '../../packages/chronos-timers/src/config.js';
import type { ChronosApp } from '../../packages/chronos-timers-server/src/http/app.js';
import { createApp } from '../../packages/chronos-timers-server/src/server.js';
import { silentLogger } from '../../packages/chronos-timers/src/logger.js';
import { TOOLS } from '../../packages/chronos-timers-server/src/mcp/tools/index.js';
import { ChronosService } from '../../packages/chronos-timers-server/src/service.js';
import type { Db } from '../../packages/chronos-timers/src/store/driver/db.js';
import {
  BIN,
  childEnv as cliChildEnv,
  ROOT,
  runChronos as cliRunChronos,
  tempDataDir,
  type Run,
} from '../cli/support.js';
import { backdate, OTHER, OWNER, RecordingReceiver } from '../support/harness.js';

export { OTHER, OWNER };

export { ALARM_VIEW_KEYS, RFC3339_MS } from '../http/support.js';
export { BIN, ROOT, tempDataDir, type Run };
export const OPERATOR_TOKEN = 'operator-token-for-mcp-tests-0123456789';

export interface McpTestServer {
  app: ChronosApp;
  service: ChronosService;
  receiver: RecordingReceiver;
  /** `http://127.0.0.1:<port>` */
  url: string;
  ownerKey: string;
  otherKey: string;
  close(): Promise<void>;
}

/** The API app over `db` (which stays open: it belongs to the test file), listening on a free port. */
export async function openMcpServer(db: Db, env: Record<string, string> = {}): Promise<McpTestServer> {
  const config = loadConfig({
    CHRONOS_OPERATOR_TOKEN: OPERATOR_TOKEN,
    CHRONOS_CREATE_RATE: '0',
    CHRONOS_MAX_ACTIVE_ALARMS: '0',
    CHRONOS_MIN_CRON_INTERVAL: '60s',
    ...env,
  });
  const receiver = new RecordingReceiver();
  const service = await ChronosService.open(config, { db, logger: silentLogger, receiver });
  const app = await createApp(service);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  const owner = await service.keys.create(OWNER.did, 'mcp-test');
  const other = await service.keys.create(OTHER.did, 'mcp-other');
  return {
    app,
    service,
    receiver,
    url: `http://127.0.0.1:${port}`,
    ownerKey: owner.key,
    otherKey: other.key,
    async close() {
      await app.close();
      await service.stop();
    },
  };
}

/** An SDK client connected over Streamable HTTP with `headers`, its tools listed (so it validates output). */
export async function httpClient(url: string, headers: Record<string, string>): Promise<Client> {
  const client = new Client({ name: 'chronos-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL('/mcp', url), { requestInit: { headers } }));
  await client.listTools();
  return client;
}

/** The environment of a child (as the CLI tests make it), logging warnings only. */
export function childEnv(extra: Record<string, string>): Record<string, string> {
  return cliChildEnv({ LOG_LEVEL: 'warn', ...extra });
}

export interface StdioSession {
  client: Client;
  /** What the child wrote to stderr so far. */
  stderr(): string;
  /** Resolves once what the child wrote to stderr passes `test` (fails after a generous deadline). */
  stderrShows(test: (text: string) => boolean, what: string, deadlineMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** Spawns `chronos mcp` with `env` and connects an SDK client to it over stdio. */
export async function stdioClient(env: Record<string, string>): Promise<StdioSession> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp'],
    cwd: ROOT,
    env: childEnv(env),
    stderr: 'pipe',
  });
  let stderr = '';
  const watchers = new Set<() => void>();
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    for (const check of watchers) check();
  });
  // Resolves on the stderr chunk that makes `test` true: an event, not a timer.
  const stderrShows = (test: (text: string) => boolean, what: string, deadlineMs = 60_000) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`stderr never showed ${what}:\n${stderr}`)),
        deadlineMs,
      );
      const check = () => {
        if (!test(stderr)) return;
        clearTimeout(timer);
        watchers.delete(check);
        resolve();
      };
      watchers.add(check);
      check();
    });
  const client = new Client({ name: 'chronos-test', version: '1.0.0' });
  try {
    await client.connect(transport);
  } catch (error) {
    throw new Error(`chronos mcp did not start: ${(error as Error).message}\n${stderr}`, { cause: error });
  }
  await client.listTools();
  return { client, stderr: () => stderr, stderrShows, close: () => client.close() };
}

/** Calls a tool; returns the result, whose structured content (if any) matches the tool's output schema. */
export async function callTool(
  client: Client,
  name: string,
  args: Record<string, unknown>,
): Promise<CallToolResult> {
  const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
  if (!result.isError) {
    const tool = TOOLS.find((t) => t.name === name)!;
    const parsed = tool.output.safeParse(result.structuredContent);
    expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
    expect(JSON.parse(textOf(result))).toEqual(result.structuredContent);
  }
  return result;
}

/** The structured content of a successful call (fails the test on an error result). */
export async function ok(client: Client, name: string, args: Record<string, unknown>): Promise<any> {
  const result = await callTool(client, name, args);
  expect(result.isError ?? false, textOf(result)).toBe(false);
  return result.structuredContent;
}

/** The text of a refused call (fails the test on a success). */
export async function refused(client: Client, name: string, args: Record<string, unknown>): Promise<string> {
  const result = await callTool(client, name, args);
  expect(result.isError, textOf(result)).toBe(true);
  expect(result.structuredContent).toBeUndefined();
  return textOf(result);
}

export function textOf(result: CallToolResult): string {
  const first = result.content[0];
  return first?.type === 'text' ? first.text : '';
}

/** Fires alarm `id` (due within `ms`) now: backdated, one dispatcher pass; returns the wake id. */
export async function fire(server: McpTestServer, db: Db, id: string, ms = 61_000): Promise<string> {
  await backdate(db, id, ms);
  await server.service.dispatcher.runOnce();
  const wakeId = server.receiver.firesOf(id).at(-1)?.wakeId;
  if (!wakeId) throw new Error(`alarm ${id} did not fire`);
  return wakeId;
}

/** Runs `chronos <args>` to completion, as `runChronos` of the CLI tests does, logging warnings only. */
export function runChronos(args: string[], env: Record<string, string>, input = ''): Promise<Run> {
  return cliRunChronos(args, { LOG_LEVEL: 'warn', ...env }, input);
}

export function rawSession(calls: string[]): string {
  const lines = [
    '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}',
    '{"jsonrpc":"2.0","method":"notifications/initialized"}',
    ...calls.map((call, i) => `{"jsonrpc":"2.0","id":${i + 2},"method":"tools/call","params":${call}}`),
  ];
  return `${lines.join('\n')}\n`;
}
