// A client of tthd over its Unix socket (protocol/PROTOCOL.md): the session (`initialize`),
// requests answered in any order, `$/progress`, `$/cancelRequest`, and the compile's byte
// streams (the model's upload, the artifact's download or its cache file).
import { EventEmitter } from 'node:events';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { encodeBinary, encodeJson, FrameError, FrameParser } from './frame';
import { xxh64 } from './xxh64';

export const PROTOCOL_VERSION = '1.0';

/** A diagnostic of the daemon (PROTOCOL.md, section 7). */
export interface Diagnostic {
  code: string;
  severity: number; // LSP's: 1 error, 2 warning, 3 information, 4 hint
  message: string;
  location: string;
  hint: string;
}

/** A JSON-RPC error answer, or a failure of the connection (code 0). */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data: { tthCode?: string; diagnostics?: Diagnostic[] } = {},
  ) {
    super(message);
  }
  /** The daemon's diagnostics of the failure; an error that carries none is one itself (its
   *  libtth code, or the JSON-RPC code). */
  get diagnostics(): Diagnostic[] {
    if (Array.isArray(this.data.diagnostics) && this.data.diagnostics.length) return this.data.diagnostics;
    return [{ code: this.data.tthCode ?? String(this.code), severity: 1, message: this.message, location: '', hint: '' }];
  }
}

export const METHOD_NOT_FOUND = -32601;
export const REQUEST_CANCELLED = -32800;
export const CONNECTION_LOST = 0;

export interface Progress {
  kind: 'begin' | 'report' | 'end';
  stage: string;
  percentage: number;
  message?: string;
}

export interface RequestOptions {
  onProgress?: (p: Progress) => void;
  signal?: AbortSignal;
}

export interface InitializeResult {
  protocolVersion: string;
  serverInfo: { name: string; version: string };
  methods: string[];
  limits: { maxFrameBytes: number; maxRequestBytes: number; maxConcurrentRequests: number; chunkBytes: number };
  capabilities?: { modelPath?: boolean; artifactFile?: boolean };
}

export interface CompileRequest {
  modelPath: string;
  name?: string; // the model's name, a C identifier; default: derived from the file name
  target: string | object;
  options?: Record<string, unknown>;
  stream?: boolean; // upload the model and receive the artifact through the socket, as a remote client would
}

export interface CompileResult {
  result: {
    cache: 'hit' | 'miss';
    key: string;
    artifact: { size: number; xxh64: string; chunks: number; file?: { path: string; offset: number } };
    target: unknown;
    metadata: Record<string, unknown> | null;
    diagnostics: Diagnostic[];
    timings?: { total: number; stages?: { stage: string; seconds: number }[] };
    [k: string]: unknown;
  };
  artifact: Buffer;
}

type Pending = {
  method: string;
  resolve: (v: any) => void;
  reject: (e: RpcError) => void;
  options?: RequestOptions;
  chunks?: Buffer[]; // the artifact stream
  got?: number;
};

/** The name tthctl would give a model file: its base name up to the first '.', other characters '_'. */
export function modelName(file: string): string {
  let n = path.basename(file).split('.')[0].replace(/[^A-Za-z0-9_]/g, '_');
  if (!/^[A-Za-z_]/.test(n)) n = '_' + n;
  return n.slice(0, 64);
}

export class TthClient extends EventEmitter {
  private parser = new FrameParser();
  private pending = new Map<number, Pending>();
  private nextId = 1;
  private announced: { id: number; size: number } | null = null;
  private closed = false;
  info!: InitializeResult;

  private constructor(private readonly socket: net.Socket) {
    super();
    socket.on('data', (chunk) => this.onData(chunk));
    socket.on('close', () => this.fail(new RpcError(CONNECTION_LOST, 'the connection to tthd was closed')));
    socket.on('error', (e) => this.fail(new RpcError(CONNECTION_LOST, `the connection to tthd failed: ${e.message}`)));
  }

  /** Connect to the socket and open the session; rejects with the socket's error (code ENOENT,
   *  ECONNREFUSED ...) or the daemon's answer to initialize. */
  static connect(socketPath: string, clientName = 'tth-vscode', timeoutMs = 10000): Promise<TthClient> {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection(socketPath);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(Object.assign(new Error(`no answer from ${socketPath} in ${timeoutMs} ms`), { code: 'ETIMEDOUT' }));
      }, timeoutMs);
      socket.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
      socket.once('connect', () => {
        const client = new TthClient(socket);
        client
          .request('initialize', { protocolVersion: PROTOCOL_VERSION, clientInfo: { name: clientName, version: '0.1.0' } })
          .then((info: InitializeResult) => {
            clearTimeout(timer);
            client.info = info;
            resolve(client);
          }, (e) => {
            clearTimeout(timer);
            client.close();
            reject(e);
          });
      });
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  close(): void {
    this.socket.destroy();
    this.fail(new RpcError(CONNECTION_LOST, 'the connection to tthd was closed'));
  }

  /** Send a request; resolves with its result, rejects with an RpcError. */
  request<T = any>(method: string, params: object = {}, options?: RequestOptions): Promise<T> {
    return this.start(method, params, options).promise;
  }

  private start(method: string, params: object, options?: RequestOptions): { id: number; promise: Promise<any> } {
    const id = this.nextId++;
    const promise = new Promise<any>((resolve, reject) => {
      if (this.closed) {
        reject(new RpcError(CONNECTION_LOST, 'not connected to tthd'));
        return;
      }
      if (options?.signal?.aborted) {
        reject(new RpcError(REQUEST_CANCELLED, 'cancelled'));
        return;
      }
      const p: Pending = { method, resolve, reject, options };
      this.pending.set(id, p);
      options?.signal?.addEventListener('abort', () => {
        if (this.pending.has(id)) this.write(encodeJson({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id } }));
      }, { once: true });
      this.write(encodeJson({ jsonrpc: '2.0', id, method, params }));
    });
    return { id, promise };
  }

  /** Compile a model file: the daemon reads it itself when it may (same machine), else it is
   *  uploaded; the artifact comes streamed or as the daemon's cache file, checked against its
   *  XXH64 either way. */
  async compile(req: CompileRequest, options?: RequestOptions): Promise<CompileResult> {
    const abs = path.resolve(req.modelPath);
    const size = fs.statSync(abs).size;
    const name = req.name ?? modelName(abs);
    const caps = this.info.capabilities ?? {};
    const byPath = caps.modelPath && !req.stream;
    const model: Record<string, unknown> = { name, size };
    if (byPath) model.path = abs;
    else if (size > this.info.limits.maxRequestBytes)
      throw new RpcError(-32103, `the model is ${size} bytes, more than the daemon takes (${this.info.limits.maxRequestBytes})`);
    const params: Record<string, unknown> = { model, target: req.target };
    if (req.options) params.options = req.options;
    if (caps.artifactFile && !req.stream) params.delivery = 'file';
    const { id, promise } = this.start('compile', params, options);
    if (!byPath) this.upload(id, fs.readFileSync(abs));
    const result = await promise;
    const art = result.artifact;
    let bytes: Buffer;
    if (art.file) {
      try {
        bytes = readRange(art.file.path, art.file.offset, art.size);
        if (xxh64(bytes) !== art.xxh64) throw new Error('changed');
      } catch {
        // the cache file went away or changed since: ask for the stream (PROTOCOL.md, "delivery")
        return this.compile({ ...req, stream: true }, options);
      }
    } else {
      bytes = result.__artifact as Buffer;
      delete result.__artifact;
      if (bytes.length !== art.size || xxh64(bytes) !== art.xxh64)
        throw new RpcError(-32603, `the artifact received (${bytes.length} bytes) does not match the daemon's size ${art.size} and XXH64 ${art.xxh64}`);
    }
    return { result, artifact: bytes };
  }

  private upload(id: number, data: Buffer): void {
    const chunk = Math.min(this.info.limits.maxFrameBytes, this.info.limits.chunkBytes || 262144);
    for (let off = 0; off < data.length; off += chunk) {
      const part = data.subarray(off, Math.min(off + chunk, data.length));
      this.write(Buffer.concat([
        encodeJson({ jsonrpc: '2.0', method: '$/chunk', params: { id, stream: 'model', offset: off, size: part.length, total: data.length } }),
        encodeBinary(part),
      ]));
    }
  }

  private write(b: Buffer): void {
    if (!this.closed) this.socket.write(b);
  }

  private onData(chunk: Buffer): void {
    let frames;
    try {
      frames = this.parser.push(chunk);
    } catch (e) {
      this.socket.destroy();
      this.fail(new RpcError(CONNECTION_LOST, `tthd sent a malformed frame: ${(e as FrameError).message}`));
      return;
    }
    for (const f of frames) {
      if (f.kind === 'binary') this.onBinary(f.data);
      else this.onMessage(f.message as any);
    }
  }

  private onBinary(data: Buffer): void {
    const a = this.announced;
    this.announced = null;
    const p = a && this.pending.get(a.id);
    if (!p || !a || a.size !== data.length) return; // not ours to keep (a cancelled request's)
    (p.chunks ??= []).push(data);
    p.got = (p.got ?? 0) + data.length;
  }

  private onMessage(m: any): void {
    if (!m || typeof m !== 'object') return;
    if (m.method === '$/chunk') {
      this.announced = { id: m.params?.id, size: m.params?.size };
      return;
    }
    if (m.method === '$/progress') {
      const p = this.pending.get(m.params?.id);
      p?.options?.onProgress?.(m.params);
      return;
    }
    if (typeof m.method === 'string') {
      this.emit('notification', m);
      return;
    }
    if (m.id === null && m.error) {
      this.emit('protocolError', new RpcError(m.error.code, m.error.message, m.error.data));
      return;
    }
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    if (m.error) {
      p.reject(new RpcError(m.error.code, m.error.message, m.error.data ?? {}));
    } else {
      if (p.method === 'compile' && m.result && typeof m.result === 'object')
        m.result.__artifact = Buffer.concat(p.chunks ?? []);
      p.resolve(m.result);
    }
  }

  private fail(e: RpcError): void {
    if (this.closed) return;
    this.closed = true;
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
    this.emit('close', e);
  }
}

function readRange(file: string, offset: number, size: number): Buffer {
  const fd = fs.openSync(file, 'r');
  try {
    const b = Buffer.alloc(size);
    let got = 0;
    while (got < size) {
      const n = fs.readSync(fd, b, got, size - got, offset + got);
      if (n === 0) throw new Error(`${file} ends before ${offset + size}`);
      got += n;
    }
    return b;
  } finally {
    fs.closeSync(fd);
  }
}
