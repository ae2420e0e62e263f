// Logs never stall the service (src/core/log.ts, docs/operations.md "Logs"): lines go
// out asynchronously, so a process whose stderr nobody reads (a stuck log collector)
// keeps running. With a synchronous write it would block for good once the pipe's
// buffer (64 KiB) is full: 20,000 lines are about 3 MB.
import { spawn } from 'node:child_process';
import path from 'node:path';

test('a process whose stderr nobody reads goes on logging and running', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, 'log-writer.ts')], {
    env: { ...process.env, NODE_ENV: 'production', LOG_LEVEL: 'info', LOG_FORMAT: 'json', LINES: '20000' },
    stdio: ['ignore', 'pipe', 'pipe'], // stderr: a pipe this test never reads
  });
  try {
    const report = await new Promise<{ ms: number; ticks: number }>((resolve, reject) => {
      let out = '';
      const timeout = setTimeout(() => reject(new Error('the writer stalled on its stderr')), 30_000);
      child.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('\n')) { clearTimeout(timeout); resolve(JSON.parse(out)); }
      });
      child.on('exit', (code) => { clearTimeout(timeout); reject(new Error(`the writer exited with ${code} before reporting`)); });
    });
    expect(report.ticks).toBeGreaterThan(0);
  } finally {
    // SIGKILL: at a normal exit pino flushes what it holds, which would wait for a reader.
    child.kill('SIGKILL');
  }
}, 40_000);
