// The process's logger (pino): JSON lines on stderr in production, pino-pretty lines
// in development, silent under jest unless LOG_LEVEL is set. stdout stays for what the
// user asked for (npm start's demo key and URL, the CLI's answers).
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
  return pino.destination({ dest: 2, sync: true });
}

function createRootLogger(): Logger {
  const settings = logSettings();
  const base = settings.level === 'silent' ? null : baseDestination(settings.pretty);
  const stream: Sink = { write: (line) => { (capture ?? base)?.write(line); } };
  return pino({
    level: settings.level,
    base: { pid: process.pid },
    redact: {
      paths: ['key', 'secret', 'token', 'authorization', '*.key', '*.secret', '*.token', '*.authorization', 'headers', '*.headers'],
      censor: '[redacted]',
    },
    serializers: { err: pino.stdSerializers.err },
  }, stream);
}

/** The root logger; `log.child({ component })` for a part of the service. */
export const log: Logger = createRootLogger();

/**
 * Tests: every line logged from now on (at `level` or above) goes to the returned
 * array instead of stderr, until stop().
 */
export function captureLogs(level = 'debug'): { lines: string[]; text(): string; stop(): void } {
  const lines: string[] = [];
  const previous = log.level;
  capture = { write: (line) => { lines.push(line); } };
  log.level = level;
  return {
    lines,
    text: () => lines.join(''),
    stop: () => { capture = null; log.level = previous; },
  };
}
