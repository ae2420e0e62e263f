// The operator CLI: `billing <group> [<command>] [args] [--json]`
// (../shared/design/operator-cli.md). With --json exactly one JSON document goes to
// stdout; progress and logs go to stderr; a failure exits non-zero with one line on
// stderr. Groups are listed in ./groups.ts.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs, ParseArgsConfig } from 'node:util';
import { API_VERSION } from '../core/api-version';
import { loadConfig, packageRoot } from '../core/config';
import { CatalogError } from '../domain/catalog/catalog-file';
import { CliContext, Command, CommandGroup, UsageError } from './command';
import * as registry from './groups';

const groups: CommandGroup[] = Object.values(registry).filter((g): g is CommandGroup => typeof g === 'object' && g !== null && 'commands' in g);

function usageOf(group: CommandGroup, command: Command): string {
  const parts = ['billing', group.name];
  if (command.name) parts.push(command.name);
  for (const a of command.args ?? []) parts.push(a);
  for (const [name, spec] of Object.entries(command.options ?? {})) {
    const flag = spec.type === 'string' ? `--${name} ${spec.value ?? name.toUpperCase()}` : `--${name}`;
    parts.push(spec.type === 'string' && spec.required ? flag : `[${flag}]`);
  }
  parts.push('[--json]');
  return parts.join(' ');
}

function help(): string {
  const lines = ['Usage: billing <command> [--json]', '', 'Commands:'];
  for (const g of groups) for (const c of g.commands) lines.push(`  ${usageOf(g, c)}`, `      ${c.summary}`);
  lines.push('', 'Reads DATABASE_URL, or else the embedded database of `npm start` (.data/postgres).');
  lines.push('`billing --version` prints the package and API versions.');
  return lines.join('\n');
}

function commandHelp(group: CommandGroup, command: Command): string {
  const lines = [`Usage: ${usageOf(group, command)}`, '', command.summary];
  for (const [name, spec] of Object.entries(command.options ?? {})) lines.push(`  --${name.padEnd(12)} ${spec.description}`);
  lines.push(`  --${'json'.padEnd(12)} print one JSON document on stdout`);
  return lines.join('\n');
}

interface Resolved { group: CommandGroup; command: Command; rest: string[] }

function resolve(argv: string[]): Resolved {
  const [groupName, ...afterGroup] = argv;
  const group = groups.find((g) => g.name === groupName);
  if (!group) throw new UsageError(groupName ? `unknown command "${groupName}"` : 'no command given');
  const bare = group.commands.find((c) => c.name === '');
  if (bare) return { group, command: bare, rest: afterGroup };
  const [name, ...rest] = afterGroup;
  const command = group.commands.find((c) => c.name === name);
  if (!command) {
    const known = group.commands.map((c) => c.name).join(', ');
    throw new UsageError(name && !name.startsWith('-') ? `unknown command "${group.name} ${name}" (known: ${known})` : `"${group.name}" needs a command: ${known}`);
  }
  return { group, command, rest };
}

function parseInput(command: Command, rest: string[]) {
  const options: NonNullable<ParseArgsConfig['options']> = {
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  };
  for (const [name, spec] of Object.entries(command.options ?? {})) options[name] = { type: spec.type };
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message.split('\n')[0]);
  }
  const { values, positionals } = parsed;
  if (values.help) return { help: true as const, json: Boolean(values.json) };
  const expected = command.args ?? [];
  if (positionals.length < expected.length) throw new UsageError(`missing ${expected.slice(positionals.length).join(' ')}`);
  if (positionals.length > expected.length) throw new UsageError(`unexpected argument "${positionals[expected.length]}"`);
  for (const [name, spec] of Object.entries(command.options ?? {})) {
    if (spec.type === 'string' && spec.required && (typeof values[name] !== 'string' || values[name] === '')) {
      throw new UsageError(`--${name} is required`);
    }
  }
  return { help: false as const, json: Boolean(values.json), input: { args: positionals, options: values as Record<string, string | boolean | undefined> } };
}

function oneLine(message: string): string {
  return message.replace(/\s*\n\s*/g, ' ').trim();
}

/** The context of the command running now (closed on Ctrl-C). */
let active: CliContext | null = null;

export async function main(argv: string[]): Promise<number> {
  const writeOut = (s: string) => process.stdout.write(s);
  const log = (line: string) => process.stderr.write(`${line}\n`);

  if (argv[0] === '--version' || argv[0] === '-V') {
    const { version } = JSON.parse(fs.readFileSync(path.join(packageRoot, 'package.json'), 'utf8')) as { version: string };
    const json = argv.slice(1).includes('--json');
    writeOut(json ? `${JSON.stringify({ version, api_version: API_VERSION })}\n` : `billing ${version} (API version ${API_VERSION})\n`);
    return 0;
  }
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    writeOut(`${help()}\n`);
    return argv.length === 0 ? 2 : 0;
  }
  let resolved: Resolved | null = null;
  let ctx: CliContext | null = null;
  try {
    resolved = resolve(argv);
    const parsed = parseInput(resolved.command, resolved.rest);
    if (parsed.help) {
      writeOut(`${commandHelp(resolved.group, resolved.command)}\n`);
      return 0;
    }
    ctx = new CliContext(loadConfig(), log, [resolved.group.name, resolved.command.name].filter(Boolean).join(' '));
    active = ctx;
    const result = await resolved.command.run(ctx, parsed.input);
    if (parsed.json || !resolved.command.print) writeOut(`${JSON.stringify(result)}\n`);
    else writeOut(`${resolved.command.print(result)}\n`);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      const hint = resolved ? `usage: ${usageOf(resolved.group, resolved.command)}` : 'see billing --help';
      log(`billing: ${oneLine(err.message)} (${hint})`);
      return 2;
    }
    const e = err as Error & { code?: string };
    let message = err instanceof CatalogError ? `invalid catalog: ${e.message}` : e?.message || String(err);
    if (e?.code === '42P01' || e?.code === '3F000') message += ' (is the database migrated? run: billing migrate)';
    log(`billing: ${oneLine(message)}`);
    return 1;
  } finally {
    await ctx?.close();
    active = null;
  }
}

/** Exits once stdout is flushed (a library's exit hook must not pick the code). */
function exit(code: number) {
  process.stdout.write('', () => process.exit(code));
}

/** The process entry: bin/billing (the build) or `tsx src/cli/index.ts` (tests). */
export function runFromCommandLine() {
  // stdout carries only the command's result: anything a library logs goes to stderr.
  console.log = console.info = console.debug = (...a: unknown[]) => console.error(...a);
  for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
    process.once(signal, () => {
      process.stderr.write(`billing: interrupted (${signal})\n`);
      void (active?.close() ?? Promise.resolve()).finally(() => process.exit(code));
    });
  }
  main(process.argv.slice(2)).then(exit, (err) => {
    process.stderr.write(`billing: ${oneLine(String((err as Error)?.message ?? err))}\n`);
    exit(1);
  });
}

if (require.main === module) runFromCommandLine();
