// The framing of tthd's wire protocol (protocol/PROTOCOL.md, sections 2 and 6): a header
// section ("Content-Length: N", optionally "Content-Type: ..."), an empty line, N bytes of body.
// A JSON frame carries one JSON-RPC 2.0 message; a binary frame (Content-Type
// application/octet-stream) carries raw bytes announced by a `$/chunk` notification.

export const MAX_HEADER_BYTES = 4096;

export type Frame =
  | { kind: 'json'; message: unknown }
  | { kind: 'binary'; data: Buffer };

/** A header section tthd would refuse: the connection cannot be resynchronised. */
export class FrameError extends Error {}

export function encodeJson(message: unknown): Buffer {
  const body = Buffer.from(JSON.stringify(message), 'utf8');
  const head = `Content-Length: ${body.length}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'ascii'), body]);
}

export function encodeBinary(data: Uint8Array): Buffer {
  const head = `Content-Length: ${data.length}\r\nContent-Type: application/octet-stream\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'ascii'), data]);
}

type Header = { length: number; binary: boolean };

function parseHeader(text: string): Header {
  let length: number | undefined;
  let binary = false;
  for (const raw of text.split('\n')) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line === '') continue;
    const colon = line.indexOf(':');
    if (colon < 0) throw new FrameError(`header line without ':': ${JSON.stringify(line)}`);
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'content-length') {
      if (length !== undefined) throw new FrameError('Content-Length given twice');
      if (!/^[0-9]{1,19}$/.test(value)) throw new FrameError(`bad Content-Length ${JSON.stringify(value)}`);
      length = Number(value);
    } else if (name === 'content-type') {
      const media = value.split(';')[0].trim().toLowerCase();
      if (media === 'application/octet-stream') binary = true;
      else if (media !== 'application/vscode-jsonrpc' && media !== 'application/json')
        throw new FrameError(`unknown Content-Type ${JSON.stringify(value)}`);
    }
  }
  if (length === undefined) throw new FrameError('no Content-Length');
  return { length, binary };
}

/** Cuts a byte stream into frames; push() returns the frames completed by the bytes given. */
export class FrameParser {
  private buf: Buffer = Buffer.alloc(0);
  private header: Header | null = null;

  push(chunk: Buffer): Frame[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const frames: Frame[] = [];
    for (;;) {
      if (!this.header) {
        const end = headerEnd(this.buf);
        if (end < 0) {
          if (this.buf.length > MAX_HEADER_BYTES) throw new FrameError(`header section longer than ${MAX_HEADER_BYTES} bytes`);
          break;
        }
        if (end > MAX_HEADER_BYTES) throw new FrameError(`header section longer than ${MAX_HEADER_BYTES} bytes`);
        this.header = parseHeader(this.buf.subarray(0, end).toString('latin1'));
        this.buf = this.buf.subarray(end);
      }
      if (this.buf.length < this.header.length) break;
      const body = Buffer.from(this.buf.subarray(0, this.header.length));
      this.buf = this.buf.subarray(this.header.length);
      if (this.header.binary) {
        frames.push({ kind: 'binary', data: body });
      } else {
        let message: unknown;
        try {
          message = JSON.parse(body.toString('utf8'));
        } catch (e) {
          this.header = null;
          throw new FrameError(`a JSON frame's body is not JSON: ${(e as Error).message}`);
        }
        frames.push({ kind: 'json', message });
      }
      this.header = null;
    }
    return frames;
  }
}

/** The offset just past the empty line ending the header section ("\r\n\r\n" or "\n\n"), or -1. */
function headerEnd(buf: Buffer): number {
  for (let i = 0; i + 1 < buf.length; i++) {
    if (buf[i] !== 0x0a) continue;
    if (buf[i + 1] === 0x0a) return i + 2;
    if (buf[i + 1] === 0x0d && i + 2 < buf.length && buf[i + 2] === 0x0a) return i + 3;
  }
  return -1;
}
