// A real SMTP server in the test process (the smtp-server package, from nodemailer's
// authors): it receives what the worker sends over SMTP and parses each message with
// mailparser. `reject(address, code)` makes the server refuse one recipient (a 4xx
// retry, a 5xx for good) until `accept(address)`.
import type { AddressInfo } from 'node:net';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export interface Received { envelopeTo: string[]; mail: ParsedMail }

export interface SmtpStandIn {
  url: string;
  received: Received[];
  /** What arrived for one address (envelope recipient), oldest first. */
  to(address: string): Received[];
  reject(address: string, code: number): void;
  accept(address: string): void;
  close(): Promise<void>;
}

export async function startSmtpServer(): Promise<SmtpStandIn> {
  const received: Received[] = [];
  const refused = new Map<string, number>();
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onRcptTo(address, _session, callback) {
      const code = refused.get(address.address.toLowerCase());
      if (code) return callback(Object.assign(new Error('refused by the test'), { responseCode: code }));
      callback();
    },
    onData(stream, session, callback) {
      simpleParser(stream).then((mail) => {
        received.push({ envelopeTo: session.envelope.rcptTo.map((r) => r.address), mail });
        callback();
      }, callback);
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    received,
    to: (address) => received.filter((r) => r.envelopeTo.some((a) => a.toLowerCase() === address.toLowerCase())),
    reject: (address, code) => { refused.set(address.toLowerCase(), code); },
    accept: (address) => { refused.delete(address.toLowerCase()); },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
