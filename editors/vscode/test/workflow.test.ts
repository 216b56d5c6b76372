// "Compile for target..." below the editor, against a private tthd: the artifact where the
// settings say, written whole; its report and files for the model page; a refused model's
// problem naming its ONNX node; an artifact already on disk found again.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { modelProblem } from '../src/diagnostics';
import { readTar } from '../src/tar';
import { artifactPath, compileToFile, previousArtifact, writeWhole } from '../src/workflow';
import { daemonFixture, DIGITS, refusedModel, tempDir } from './support';

const F = daemonFixture();



test('the artifact goes beside the model, or into the output folder', () => {
  assert.equal(artifactPath('/w/models/my-net.onnx', ''), '/w/models/my_net.tar');
  assert.equal(artifactPath('/w/models/a.onnx', 'build/tth', '/w'), '/w/build/tth/a.tar');
  assert.equal(artifactPath('/w/models/a.onnx', '/abs/out', '/w'), '/abs/out/a.tar');
});

test('a compile writes the whole artifact and gives the page its report and files', async () => {
  const model = path.join(F.work, 'digits.onnx');
  fs.copyFileSync(DIGITS, model);
  const out = artifactPath(model, 'out', F.work);
  const stages: string[] = [];
  const v = await compileToFile(F.client, { modelPath: model, target: 'llvm', out, explain: true, onProgress: (p) => stages.push(p.stage) });
  assert.equal(v.state, 'ok', JSON.stringify(v.problems));
  assert.equal(v.cache, 'miss');
  assert.ok(stages.includes('codegen'));
  const bytes = fs.readFileSync(out);
  assert.equal(bytes.length, v.artifactBytes);
  const names = readTar(bytes).map((e) => e.name);
  assert.deepEqual(v.files!.map((f) => f.name), names);
  for (const n of ['metadata.json', 'explain/report.html', 'lib/digits.so']) assert.ok(names.includes(n), `${n} in ${names}`);
  assert.match(v.reportHtml!, /<body/);
  assert.match(v.canonical!, /^llvm /);
  assert.ok(v.workspaceBytes! > 0);
  assert.deepEqual(fs.readdirSync(path.dirname(out)), ['digits.tar'], 'no temporary file left');
  // the same artifact is found on disk by a new editor session
  const again = previousArtifact(model, out)!;
  assert.equal(again.artifactBytes, bytes.length);
  assert.equal(again.reportHtml, v.reportHtml);
  // a model newer than its artifact has none
  const later = new Date(Date.now() + 5000);
  fs.utimesSync(model, later, later);
  assert.equal(previousArtifact(model, out), undefined);
});

test('a refused model: the problem names its ONNX node and says what to do; nothing is written', async () => {
  const model = refusedModel(F.work);
  const out = path.join(F.work, 'refused.tar');
  const v = await compileToFile(F.client, { modelPath: model, target: 'llvm', out, explain: false });
  assert.equal(v.state, 'failed');
  const p = v.problems[0];
  assert.equal(p.code, 'EMODEL');
  assert.equal(p.node, 'gelu_7');
  assert.equal(p.op, 'Gelu');
  assert.match(p.message, /opset 20/);
  assert.match(p.message, /hint: export the model with opset 20 or later/);
  assert.ok(!fs.existsSync(out));
  const st = await F.client.request('status');
  assert.equal(st.requests.active, 0, 'the daemon serves on');
});

test('an unknown target fails the compile with its problem; a node name with a quote is read whole', async () => {
  const v = await compileToFile(F.client, { modelPath: DIGITS, target: 'lvm', out: path.join(F.work, 'x.tar'), explain: false });
  assert.equal(v.state, 'failed');
  assert.match(v.problems[0].message, /did you mean 'llvm'/);
  const q = modelProblem({ code: 'EMODEL', severity: 1, message: 'm', location: "node 'it's' (Foo)", hint: '' });
  assert.deepEqual([q.node, q.op], ["it's", 'Foo']);
});

test('writeWhole leaves the old file when the new one cannot be written', () => {
  const out = path.join(F.work, 'keep.tar');
  fs.writeFileSync(out, 'old');
  assert.throws(() => writeWhole(path.join(out, 'sub', 'x.tar'), Buffer.from('new')));
  assert.equal(fs.readFileSync(out, 'utf8'), 'old');
});
