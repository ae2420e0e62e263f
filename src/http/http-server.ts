// The node:http server under the express app: a header limit stated here rather than
// inherited, and an answer in problem+json to requests Node refuses before express
// sees them (headers or URL too large, unparsable HTTP). Node's own answer is a bare
// status line with no body.
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { ApiError, resolveProblemType } from '../core/errors';

/**
 * Request line plus headers, in bytes. A key is ~60 characters and the longest useful
 * URL (every event type in /v1/events?type=...) about 1 kB: 16 KiB leaves room for
 * proxies' headers and refuses the rest with 431.
 */
export const MAX_HEADER_BYTES = 16 * 1024;

/** Idle keep-alive connections are kept this long: longer than common proxies' 60 s. */
export const KEEP_ALIVE_MS = 65_000;

/** The service's base URL for these answers, which come before any request is read. */
export type BaseUrl = () => string | undefined;

function problemResponse(err: ApiError, base: BaseUrl): string {
  const body = JSON.stringify(resolveProblemType(err.toProblem(), base()));
  return [
    `HTTP/1.1 ${err.status} ${http.STATUS_CODES[err.status] ?? ''}`,
    'Content-Type: application/problem+json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'X-Content-Type-Options: nosniff',
    'Cache-Control: no-store',
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}

export function answerClientErrors(server: http.Server, base: BaseUrl = () => undefined): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // A client that went away or timed out has nobody left to read an answer.
    if (err.code === 'ECONNRESET' || err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || !socket.writable) {
      socket.destroy();
      return;
    }
    const answer = err.code === 'HPE_HEADER_OVERFLOW'
      ? new ApiError('request_header_too_large', `The request line and headers exceed ${MAX_HEADER_BYTES / 1024} kB.`)
      : new ApiError('invalid_request', 'The request is not valid HTTP.', { status: 400 });
    socket.end(problemResponse(answer, base));
  });
}

/** An HTTP server for the app (or for a request listener attached later). */
export function createHttpServer(listener?: http.RequestListener, base?: BaseUrl): http.Server {
  const server = http.createServer({ maxHeaderSize: MAX_HEADER_BYTES });
  // An idle keep-alive connection is closed by the client (or the proxy in front) first:
  // a server that closes it first races the client's next request on that socket, which
  // then fails with ECONNRESET. Proxies keep idle upstream connections about 60 s.
  server.keepAliveTimeout = KEEP_ALIVE_MS;
  if (listener) server.on('request', listener);
  answerClientErrors(server, base);
  return server;
}
