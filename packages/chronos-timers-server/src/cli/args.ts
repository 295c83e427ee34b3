/**
 * A command's arguments, read the same way by every command: options by name (`--owner <did>`,
 * `--json`), positionals counted, and refusals in the house's words — the option as typed, what
 * was expected, and a "did you mean" — instead of Node's parser messages. `--help` is answered
 * before any of this, by the command table (cli.ts).
 */
import { parseArgs } from 'node:util';
import { UsageError } from './io.js';

export type OptionSpec = Record<string, { type: 'string' | 'boolean'; value?: string }>;

export interface Parsed {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
}

/** Reads `args` against `options`, expecting `positionals` positional arguments (names, for messages). */
export function readArgs(
  args: readonly string[],
  options: OptionSpec,
  positionals: readonly string[] = [],
): Parsed {
  const known = Object.keys(options).map((name) => `--${name}`);
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      options: Object.fromEntries(Object.entries(options).map(([name, o]) => [name, { type: o.type }])),
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    throw new UsageError(describeParseError(error as Error & { code?: string }, options, known));
  }
  if (parsed.positionals.length > positionals.length) {
    throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[positionals.length])}`);
  }
  if (parsed.positionals.length < positionals.length) {
    throw new UsageError(
      `expected ${positionals.map((p) => `<${p}>`).join(' ')}, got nothing for <${positionals[parsed.positionals.length]}>`,
    );
  }
  return parsed as Parsed;
}

function describeParseError(error: Error & { code?: string }, options: OptionSpec, known: string[]): string {
  const option = /'(-{1,2}[^' ]+)/.exec(error.message)?.[1];
  if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) {
    const expected = known.length > 0 ? `; expected ${known.join(', ')}` : '; this command takes no options';
    const guess = known.find((k) => k.replace(/^--/, '').startsWith(option.replace(/^-+/, '').slice(0, 3)));
    return `unknown option ${option}${expected}${guess ? `; did you mean ${guess}?` : ''}`;
  }
  if (error.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option) {
    const name = option.replace(/^-+/, '').split('=')[0]!;
    const spec = options[name];
    return spec?.type === 'string'
      ? `${option.split('=')[0]} needs a value: ${option.split('=')[0]} <${spec.value ?? name}>`
      : `${option.split('=')[0]} takes no value`;
  }
  return error.message;
}
