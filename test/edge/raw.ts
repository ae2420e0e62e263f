// A raw HTTP/1.1 request for the edge tests: fetch may not forge Host or send bytes
// that are not UTF-8, and would refuse some of what these tests must send.
import http from 'node:http';

export interface RawReply { status: number; headers: http.IncomingHttpHeaders; text: string; body: any } // eslint-disable-line @typescript-eslint/no-explicit-any

export function raw(base: string, method: string, path: string, opts: { headers?: Record<string, string>; body?: string | Buffer; localAddress?: string } = {}): Promise<RawReply> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const headers = { ...(opts.headers ?? {}) };
    if (opts.body !== undefined) headers['content-length'] = String(Buffer.byteLength(opts.body));
    const req = http.request({ host: url.hostname, port: url.port, method, path, headers, agent: false, localAddress: opts.localAddress }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown;
        try { body = text ? JSON.parse(text) : undefined; } catch { body = undefined; }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}
