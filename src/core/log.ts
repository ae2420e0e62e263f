// The process's logger (pino): JSON lines on stderr in production, pino-pretty lines
// in development, silent under jest unless LOG_LEVEL is set. stdout stays for what the
// user asked for (npm start's demo key and URL, the CLI's answers).
//
// Lines are written asynchronously (pino's SonicBoom, sync: false): a request never
// waits on stderr, so a slow log reader cannot stall the API, and lines written while
// a write is under way go out together. Pino flushes what is buffered when the process
// exits, crashes included; only a SIGKILL can lose the last lines, and a reader stalled
// for good makes the service drop lines past 16 MiB instead of stalling.
//
// Never log keys, secrets, tokens or card data: log ids (community, key, job), route
// templates (never raw paths, which may carry tokens) and error stacks. Fields that
// could carry one by mistake are redacted below.
import pino from 'pino';
import { logSettings } from './config';

export type Logger = pino.Logger;

interface Sink { write(line: string): void }

let capture: Sink | null = null;

function baseDestination(pretty: boolean): Sink {
  if (pretty) {
    try {
      // A dev dependency: absent from production installs, hence the fallback to JSON.
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const pinoPretty = require('pino-pretty') as typeof import('pino-pretty');
      return pinoPretty({ destination: 2, sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' });
    } catch {
      // fall through
    }
  }
  // Up to 16 MiB wait in memory for a reader that stalls; beyond that lines are dropped
  // (SonicBoom's maxLength) rather than the process stalling or growing without bound.
  return pino.destination({ dest: 2, sync: false, maxLength: 16 * 1024 * 1024 });
}

const REDACT = {
  paths: ['key', 'secret', 'token', 'bot_token', 'authorization', '*.key', '*.secret', '*.token', '*.bot_token', '*.authorization',
    'headers', '*.headers', 'settings.bot_token', '*.settings.bot_token'],
  censor: '[redacted]',
};

const settings = logSettings();
const base = settings.level === 'silent' ? null : baseDestination(settings.pretty);
const stream: Sink = { write: (line) => { (capture ?? base)?.write(line); } };

/** The root logger; `log.child({ component })` for a part of the service. */
export const log: Logger = pino({
  level: settings.level,
  base: { pid: process.pid },
  redact: REDACT,
  serializers: { err: pino.stdSerializers.err },
}, stream);

/**
 * The access log (src/web/observe.ts): one line per request made of fixed fields
 * (ids, route template, status, duration, cause), none of which can hold a secret, so
 * it skips the redaction pass every other line pays. Same stream, same level as `log`.
 */
export const accessLog: Logger = pino({ level: settings.level, base: { pid: process.pid } }, stream);

/**
 * Tests: every line logged from now on (at `level` or above) goes to the returned
 * array instead of stderr, until stop().
 */
export function captureLogs(level = 'debug'): { lines: string[]; text(): string; stop(): void } {
  const lines: string[] = [];
  const previous = log.level;
  const previousAccess = accessLog.level;
  capture = { write: (line) => { lines.push(line); } };
  log.level = level;
  accessLog.level = level;
  return {
    lines,
    text: () => lines.join(''),
    stop: () => { capture = null; log.level = previous; accessLog.level = previousAccess; },
  };
}
