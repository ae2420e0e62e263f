// The text of a PDF, read by pdf-parse (v2) as a reader of the file would. pdfjs loads
// its worker with a dynamic import(), which jest's module sandbox refuses without
// --experimental-vm-modules, so the parser runs in a plain node child process.
import { execFile } from 'node:child_process';

const SCRIPT = `
const { PDFParse } = require('pdf-parse');
const chunks = [];
process.stdin.on('data', (c) => chunks.push(c));
process.stdin.on('end', async () => {
  const parser = new PDFParse({ data: new Uint8Array(Buffer.concat(chunks)) });
  try {
    process.stdout.write((await parser.getText()).text);
  } finally {
    await parser.destroy();
  }
});`;

export function pdfText(bytes: Uint8Array): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(process.execPath, ['-e', SCRIPT], { cwd: __dirname, maxBuffer: 10 * 1024 * 1024 }, (err, out, stderr) =>
      (err ? reject(new Error(`pdf-parse failed: ${err.message}\n${stderr}`)) : resolve(out)));
    child.stdin!.end(Buffer.from(bytes));
  });
}
