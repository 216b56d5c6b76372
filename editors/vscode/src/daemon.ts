// Finding, starting and keeping a connection to the user's tthd: the socket tthctl uses
// (PROTOCOL.md, section 1), tthd started through tthctl when nothing answers there (tthctl
// starts it detached, with its idle exit; docs/tthctl.md, "Starting the daemon"), and a new
// connection when the daemon restarts.
import { execFile } from 'node:child_process';
import { EventEmitter } from 'node:events';
import * as os from 'node:os';
import * as path from 'node:path';
import { TthClient } from './client';

/** The socket tthctl uses: $XDG_RUNTIME_DIR/tth/tthd.sock, else /tmp/tth-$UID/tthd.sock. */
export function defaultSocketPath(env: NodeJS.ProcessEnv = process.env, uid: number = os.userInfo().uid): string {
  if (env.XDG_RUNTIME_DIR) return path.join(env.XDG_RUNTIME_DIR, 'tth', 'tthd.sock');
  return `/tmp/tth-${uid}/tthd.sock`;
}

export interface DaemonSettings {
  socket: string;   // '' for the default
  tthctl: string;   // the tthctl program
  env?: NodeJS.ProcessEnv;
}

export type DaemonState =
  | { state: 'connecting' }
  | { state: 'up'; client: TthClient; version: string }
  | { state: 'down'; reason: string; retryMs: number };

const NOT_RUNNING = new Set(['ENOENT', 'ECONNREFUSED']);

/** Start tthd through tthctl (`tthctl --socket S status --json` starts one when none answers and
 *  waits until it does); rejects with tthctl's own message. */
export function startDaemon(settings: DaemonSettings, socket: string): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(settings.tthctl || 'tthctl', ['--socket', socket, 'status', '--json'], { env: settings.env ?? process.env, timeout: 30000 },
      (err, _stdout, stderr) => {
        if (!err) return resolve();
        const why = (err as NodeJS.ErrnoException).code === 'ENOENT'
          ? `tthctl not found ('${settings.tthctl}'): set tth.tthctlPath to the tthctl program`
          : (stderr.trim() || err.message);
        reject(new Error(why));
      });
  });
}

/** Connect, starting the daemon when nothing answers on the socket. */
export async function connectOrStart(settings: DaemonSettings): Promise<TthClient> {
  const socket = settings.socket || defaultSocketPath(settings.env);
  try {
    return await TthClient.connect(socket);
  } catch (e) {
    if (!NOT_RUNNING.has((e as NodeJS.ErrnoException).code ?? '')) throw e;
  }
  await startDaemon(settings, socket);
  return TthClient.connect(socket);
}

/** One connection to tthd kept up: emits 'state' (DaemonState) on each change; after the daemon
 *  goes away it tries again with backoff (0.5 s doubling to 10 s), starting it through tthctl
 *  when `start` allows (it does after a restart: the daemon idles out when unused, and the
 *  editor starts it again when asked for work). */
export class DaemonConnection extends EventEmitter {
  private current: DaemonState = { state: 'connecting' };
  private timer: NodeJS.Timeout | null = null;
  private backoff = 500;
  private disposed = false;
  private connecting: Promise<TthClient> | null = null;

  constructor(private settings: DaemonSettings, private readonly autoStart = true) {
    super();
  }

  get state(): DaemonState {
    return this.current;
  }

  get socketPath(): string {
    return this.settings.socket || defaultSocketPath(this.settings.env);
  }

  /** Use other settings (the user changed them): drop the connection and connect again. */
  reconfigure(settings: DaemonSettings): void {
    this.settings = settings;
    if (this.current.state === 'up') this.current.client.close();
    else this.retryNow();
  }

  /** The connected client; connects (and starts tthd) first when there is none. */
  async client(): Promise<TthClient> {
    if (this.current.state === 'up' && !this.current.client.isClosed) return this.current.client;
    return this.connect(true);
  }

  /** Try now (cancels a pending retry); nothing when connected. */
  retryNow(): void {
    this.connect(this.autoStart).catch(() => undefined);
  }

  private connect(start: boolean): Promise<TthClient> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.current.state === 'up' && !this.current.client.isClosed) return Promise.resolve(this.current.client);
    if (this.connecting) return this.connecting;
    this.set({ state: 'connecting' });
    const p = (start ? connectOrStart(this.settings) : TthClient.connect(this.socketPath)).then((client) => {
      this.connecting = null;
      if (this.disposed) {
        client.close();
        throw new Error('disposed');
      }
      this.backoff = 500;
      client.once('close', () => this.lost('tthd closed the connection'));
      this.set({ state: 'up', client, version: client.info.serverInfo.version });
      return client;
    }, (e: Error) => {
      this.connecting = null;
      this.lost(e.message);
      throw e;
    });
    this.connecting = p;
    return p;
  }

  private lost(reason: string): void {
    if (this.disposed) return;
    const retryMs = this.backoff;
    this.backoff = Math.min(this.backoff * 2, 10000);
    this.set({ state: 'down', reason, retryMs });
    if (this.timer) clearTimeout(this.timer);
    // after a loss, only reconnect to a daemon that is there; work asked for starts one
    this.timer = setTimeout(() => {
      this.timer = null;
      this.connect(false).catch(() => undefined);
    }, retryMs);
  }

  private set(s: DaemonState): void {
    this.current = s;
    this.emit('state', s);
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.current.state === 'up') this.current.client.close();
    this.removeAllListeners();
  }
}
