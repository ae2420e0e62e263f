// Child of log-stall.test.ts: logs LINES access-sized lines through the service's
// logger, then says on stdout how long that took and whether a timer still fired
// meanwhile. Its stderr is a pipe nobody reads.
import { accessLog } from '../../src/core/log';

const LINES = Number(process.env.LINES ?? 20000);
let ticks = 0;
const timer = setInterval(() => { ticks++; }, 1);
const t0 = performance.now();
void (async () => {
  for (let i = 0; i < LINES; i++) {
    accessLog.info({ request_id: `req-${i}`, kind: 'access', method: 'GET', route: '/v1/entitlements/check', status: 200, duration_ms: 1.5 }, 'request');
    // Let the event loop turn now and then, as a server between requests.
    if (i % 1000 === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  clearInterval(timer);
  process.stdout.write(`${JSON.stringify({ ms: Math.round(performance.now() - t0), ticks })}\n`);
})();
