// What the tests share: the build under test (TTH_BUILD_ROOT, set by meson; else build-test),
// a private tthd of that build on its own socket and cache in a temporary directory, never the
// user's, and models made with the onnx Python package (a reference we did not write).
import assert from 'node:assert/strict';
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before } from 'node:test';
import { TthClient } from '../src/client';

export const SOURCE = process.env.TTH_SOURCE_ROOT ?? path.resolve(__dirname, '..', '..', '..', '..');
export const BUILD = process.env.TTH_BUILD_ROOT ?? path.join(SOURCE, 'build-test');
export const TTHD = path.join(BUILD, 'daemon', 'tthd');
export const TTHCTL = path.join(BUILD, 'client', 'tthctl');
export const DIGITS = path.join(SOURCE, 'examples', 'digits.onnx');
export const PYTHON = '/usr/bin/python3';

export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `tth-vscode-${prefix}-`));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class PrivateDaemon {
  readonly socket: string;
  readonly cache: string;
  proc: ChildProcess | null = null;
  exit: Promise<number | null> = Promise.resolve(null);
  private log: string;

  constructor(readonly dir: string = tempDir('tthd')) {
    this.socket = path.join(dir, 'tthd.sock');
    this.cache = path.join(dir, 'cache');
    this.log = path.join(dir, 'tthd.log');
  }

  /** Launch tthd and wait until it answers. */
  async start(): Promise<this> {
    const log = fs.openSync(this.log, 'a');
    const proc = spawn(TTHD, ['--socket', this.socket, '--cache-dir', this.cache, '--workers', '2'], { stdio: ['ignore', 'ignore', log] });
    fs.closeSync(log);
    this.proc = proc;
    this.exit = new Promise((resolve) => proc.on('exit', (code) => resolve(code)));
    for (let i = 0; i < 200; i++) {
      try {
        (await TthClient.connect(this.socket)).close();
        return this;
      } catch {
        if (proc.exitCode !== null) break;
        await sleep(50);
      }
    }
    throw new Error(`tthd did not start: ${this.logTail()}`);
  }

  logTail(): string {
    try {
      return fs.readFileSync(this.log, 'utf8').slice(-3000);
    } catch {
      return '(no log)';
    }
  }

  /** A new connected client. */
  client(): Promise<TthClient> {
    return TthClient.connect(this.socket, 'tth-vscode-test');
  }

  /** Stop through the protocol's shutdown and return tthd's exit status (0 when clean: the
   *  sanitizer build exits otherwise on a leak). */
  async stop(): Promise<number | null> {
    if (!this.proc || this.proc.exitCode !== null) return this.proc?.exitCode ?? null;
    try {
      const c = await this.client();
      await c.request('shutdown').catch(() => undefined);
      c.close();
    } catch {
      this.proc.kill('SIGTERM');
    }
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([this.exit, new Promise<'timeout'>((r) => { timer = setTimeout(() => r('timeout'), 30000); })]);
    clearTimeout(timer);
    if (code === 'timeout') {
      this.proc.kill('SIGKILL');
      throw new Error('tthd did not stop within 30 s');
    }
    if (code !== 0) throw new Error(`tthd exited with ${code}: ${this.logTail()}`);
    return code;
  }

  remove(): void {
    if (this.proc && this.proc.exitCode === null) this.proc.kill('SIGKILL');
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** What a test file against the daemon needs: a private tthd, a client connected to it, a work
 *  directory. Set up before the file's tests (node:test hooks; then `more.setup`, in the same
 *  hook: top-level hooks of node 20 do not wait for each other) and torn down after them
 *  (`more.teardown` first): the client closed, tthd stopped with its clean exit asserted, the
 *  directories removed. */
export interface DaemonFixture {
  daemon: PrivateDaemon;
  client: TthClient;
  work: string;
}

export function daemonFixture(more: { setup?: (f: DaemonFixture) => Promise<void>; teardown?: () => Promise<void> } = {}): DaemonFixture {
  const f = {} as DaemonFixture;
  before(async () => {
    f.daemon = await new PrivateDaemon().start();
    f.client = await f.daemon.client();
    f.work = tempDir('work');
    await more.setup?.(f);
  });
  after(async () => {
    await more.teardown?.();
    f.client?.close();
    if (f.work) fs.rmSync(f.work, { recursive: true, force: true });
    try {
      assert.equal(await f.daemon.stop(), 0, 'tthd stops cleanly (no leak under the sanitizers)');
    } finally {
      f.daemon.remove();
    }
  });
  return f;
}

/** Run Python (the onnx package) and return its standard output. */
export function python(code: string, ...args: string[]): string {
  return execFileSync(PYTHON, ['-c', code, ...args], { encoding: 'utf8' });
}

/** A model refused at import: Relu then Gelu (ONNX has Gelu from opset 20) at opset 17. */
export function refusedModel(dir: string): string {
  const file = path.join(dir, 'refused.onnx');
  python(`
import sys, onnx
from onnx import helper, TensorProto
nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu_1"), helper.make_node("Gelu", ["y"], ["z"], name="gelu_7")]
g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                      [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
`, file);
  return file;
}
