// Runs the operator CLI in this process (its `main`), capturing what it writes.
// For a CLI run as a separate process, the way an operator does, see test/support/cli-process.ts.
import { main } from '../../src/cli/index';

export interface CapturedCli { code: number; out: string; err: string }

/** Runs `billing <argv>` in-process; stdout and stderr are captured, not printed. */
export async function cli(...argv: string[]): Promise<CapturedCli> {
  let out = '';
  let err = '';
  const o = jest.spyOn(process.stdout, 'write').mockImplementation((s: string | Uint8Array) => { out += String(s); return true; });
  const e = jest.spyOn(process.stderr, 'write').mockImplementation((s: string | Uint8Array) => { err += String(s); return true; });
  try {
    const code = await main(argv);
    return { code, out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}
