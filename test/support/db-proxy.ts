// A TCP proxy between the service and the run's PostgreSQL that a test can cut and
// restore, to play a database outage without touching the shared server:
// - cut('refuse'): open connections are destroyed (as when the server restarts) and new
//   ones are refused (ECONNREFUSED), the way a stopped server answers;
// - cut('blackhole'): open connections are destroyed, new ones are accepted and never
//   answered (a network partition: only timeouts end the wait);
// - restore(): connections reach PostgreSQL again, on the same port.
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export type CutMode = 'refuse' | 'blackhole';

export interface DbProxy {
  port: number;
  /** url with its host and port replaced by the proxy's. */
  through(url: string): string;
  cut(mode: CutMode): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function startDbProxy(targetUrl: string): Promise<DbProxy> {
  const target = new URL(targetUrl);
  const targetPort = Number(target.port || 5432);
  const targetHost = target.hostname;
  const sockets = new Set<net.Socket>();
  let mode: 'open' | CutMode = 'open';
  let server: net.Server | null = null;

  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
  };

  const listen = async (port: number): Promise<number> => {
    const s = net.createServer((client) => {
      track(client);
      if (mode === 'blackhole') return; // accepted, never answered
      const upstream = net.connect(targetPort, targetHost);
      track(upstream);
      client.pipe(upstream);
      upstream.pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => { s.off('error', reject); resolve(); });
    });
    server = s;
    return (s.address() as AddressInfo).port;
  };

  const stopListening = async () => {
    const s = server;
    server = null;
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  };

  const destroyAll = () => { for (const s of sockets) s.destroy(); };

  const port = await listen(0);
  return {
    port,
    through(url: string) {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    async cut(how: CutMode) {
      mode = how;
      destroyAll();
      if (how === 'refuse') await stopListening();
    },
    async restore() {
      destroyAll(); // blackholed clients give up and reconnect
      mode = 'open';
      if (!server) await listen(port);
    },
    async close() {
      destroyAll();
      await stopListening();
    },
  };
}
