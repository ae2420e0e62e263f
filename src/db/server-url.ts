// The base URL a running `npm start` serves on, recorded in <dataDir>/server-url when
// it starts (beside the embedded database and the generated webhook key), so the
// operator CLI on the same machine prints links to the server's real port even when
// PORT is not exported in the CLI's shell (docs/decisions/first-start-and-clocks.md).
import fs from 'node:fs';
import path from 'node:path';

const FILE = 'server-url';

/** Records url; a data directory that cannot be written is reported, never fatal. */
export function recordServerUrl(dataDir: string, url: string, log: (line: string) => void): void {
  try {
    fs.mkdirSync(dataDir, { recursive: true });
    fs.writeFileSync(path.join(dataDir, FILE), `${url}\n`);
  } catch (err) {
    log(`Could not record the server's URL in ${path.join(dataDir, FILE)}: ${(err as Error).message}`);
  }
}

/** The URL the last server started from dataDir recorded, or null. */
export function recordedServerUrl(dataDir: string): string | null {
  try {
    const text = fs.readFileSync(path.join(dataDir, FILE), 'utf8').trim();
    return /^https?:\/\/[^\s/]+$/.test(text) ? text : null;
  } catch {
    return null;
  }
}
