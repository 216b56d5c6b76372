// The client against a real tthd on a private socket: the session, requests in flight together,
// errors with their diagnostics, compiles by path and by upload (the same bytes, checked against
// the daemon's XXH64), progress, cancellation, and the daemon serving on after each.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { test } from 'node:test';
import { modelName, Progress, RpcError } from '../src/client';
import { xxh64 } from '../src/xxh64';
import { daemonFixture, DIGITS } from './support';

const F = daemonFixture();



test('initialize gives the limits and capabilities; requests in flight together are answered', async () => {
  assert.equal(F.client.info.protocolVersion, '1.0');
  assert.ok(F.client.info.methods.includes('targets/recent'));
  assert.ok(F.client.info.limits.maxFrameBytes >= 65536);
  const [st, tags, kinds, plugins] = await Promise.all(['status', 'tags/list', 'targets/list', 'plugins/list'].map((m) => F.client.request(m)));
  assert.equal(st.socket, F.daemon.socket);
  assert.ok(tags.tags.some((t: any) => t.name === 'arm/cortex-m55'));
  assert.deepEqual(kinds.kinds.map((k: any) => k.kind).filter((k: string) => k === 'llvm' || k === 'c').sort(), ['c', 'llvm']);
  assert.ok(plugins.plugins.some((p: any) => p.name === 'llvm-cpu'));
});

test('a refused target is an RpcError with the daemon diagnostics', async () => {
  const e = await F.client.request('target/parse', { target: 'lvm -mcpu=x' }).then(() => null, (x) => x);
  assert.ok(e instanceof RpcError);
  assert.equal(e.code, -32006);
  assert.equal(e.data.tthCode, 'EUNKNOWN');
  assert.equal(e.diagnostics[0].hint, "did you mean 'llvm'?");
  const m = await F.client.request('no/such').then(() => null, (x) => x);
  assert.equal(m.code, -32601);
});

test('compile by path and by upload give the same verified artifact; progress rises', async () => {
  const seen: Progress[] = [];
  const a = await F.client.compile({ modelPath: DIGITS, target: 'c' }, { onProgress: (p) => seen.push(p) });
  assert.equal(a.result.cache, 'miss');
  assert.equal(a.artifact.length, a.result.artifact.size);
  assert.equal(xxh64(a.artifact), a.result.artifact.xxh64, 'our XXH64 is libxxhash\'s');
  assert.equal(a.artifact.subarray(257, 262).toString(), 'ustar', 'a tar file');
  assert.equal(seen[0].kind, 'begin');
  assert.equal(seen[seen.length - 1].kind, 'end');
  const pcs = seen.filter((p) => p.kind === 'report').map((p) => p.percentage);
  assert.ok(pcs.length > 3);
  assert.deepEqual(pcs, [...pcs].sort((x, y) => x - y), 'progress never goes back');

  const b = await F.client.compile({ modelPath: DIGITS, target: 'c', stream: true });
  assert.equal(b.result.cache, 'hit');
  assert.ok(!b.result.artifact.file, 'streamed, not as a file');
  assert.ok(b.result.artifact.chunks >= 1);
  assert.ok(a.artifact.equals(b.artifact), 'the same bytes');
  assert.equal(a.result.key, b.result.key);

  const f = await F.client.compile({ modelPath: DIGITS, target: 'c' });
  assert.ok(f.result.artifact.file, 'a hit by the cache file when the daemon offers it');
  assert.ok(a.artifact.equals(f.artifact));
});

test('a cancelled compile is RequestCancelled, and the connection serves on', async () => {
  const abort = new AbortController();
  const p = F.client.compile({ modelPath: DIGITS, target: 'llvm -opt-level=1', options: { no_cache: true } }, {
    signal: abort.signal,
    onProgress: (x) => { if (x.kind === 'begin') abort.abort(); },
  });
  const e = await p.then(() => null, (x) => x);
  assert.ok(e instanceof RpcError, 'the compile did not fail');
  assert.equal(e.code, -32800);
  const st = await F.client.request('status');
  assert.equal(st.requests.active, 0);
});

test('the model name is derived as tthctl derives it', () => {
  assert.equal(modelName('/a/my-net.v2.onnx'), 'my_net');
  assert.equal(modelName('7up.onnx'), '_7up');
  assert.equal(modelName(`${'x'.repeat(80)}.onnx`).length, 64);
});

test('a connection the daemon closes fails its requests', async () => {
  const c2 = await F.daemon.client();
  const closed = new Promise((r) => c2.once('close', r));
  c2.close();
  await closed;
  await assert.rejects(c2.request('status'), (e: RpcError) => e.code === 0);
  assert.ok(fs.existsSync(F.daemon.socket));
});
