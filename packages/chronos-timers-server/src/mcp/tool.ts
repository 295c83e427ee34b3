/**
 * What one MCP tool is: its published name, description, schemas and annotations, and `run`,
 * which takes the arguments as the client sent them and answers with the HTTP answer of the
 * same operation (`server_time` is added by the server). A refusal is thrown as a ChronosError;
 * the server turns it into an `isError` result.
 */
import type { ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { invalidInput } from 'chronos-timers/internal';
import { readForm } from 'chronos-timers/internal';
import type { Owner } from 'chronos-timers/internal';
import type { ChronosService } from '../service.js';

/** The part of the service the tools use. */
export type McpService = Pick<ChronosService, 'alarms' | 'wakes' | 'dbClock' | 'logger'>;

export interface ToolContext {
  service: McpService;
  owner: Owner;
  /** The raw JSON text of `arguments.payload` in this call, when the transport kept it (I4). */
  rawPayload(parsed: unknown): string | undefined;
  /** The W3C traceparent of the request that carried the call (MCP over HTTP), or ''. */
  trace: string;
}

export interface ChronosTool {
  name: string;
  title: string;
  description: string;
  input: z.ZodObject;
  output: z.ZodObject;
  annotations: ToolAnnotations;
  run(args: Record<string, unknown>, ctx: ToolContext): Promise<Record<string, unknown>>;
}

/** Refuses arguments other than `allowed`, naming what to send instead (as every door does). */
export function onlyFields(args: Record<string, unknown>, allowed: readonly string[]): void {
  const any = { schema: z.unknown(), expected: 'a value' };
  readForm(args, {
    names: Object.fromEntries(allowed.map((name) => [name, name])),
    rules: Object.fromEntries(allowed.map((name) => [name, any])),
    aliases: { alarmid: 'id', alarm: 'id', wake: 'wake_id', wakeid: 'wake_id', id: 'wake_id' },
  });
}

/** The string argument `name`, or an `invalid_input` error saying what it should be. */
export function stringArg(args: Record<string, unknown>, name: string, expected: string): string {
  const value = args[name];
  if (typeof value !== 'string') throw invalidInput(name, expected, value);
  return value;
}
