// The TARGET strings of tth_add_model calls, found by CMake's lexical rules, and their problems
// placed on the characters of the file.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkCMake, findTargets } from '../src/cmake';
import { daemonFixture } from './support';

const FILE = `cmake_minimum_required(VERSION 3.20)
project(app C)
find_package(tth REQUIRED)
# tth_add_model(commented MODEL a.onnx TARGET "lvm")
#[[ a bracket comment
tth_add_model(bracketed MODEL a.onnx TARGET "lvm")
]]
message(STATUS "tth_add_model(in_a_string TARGET \\"lvm\\")")
tth_add_model(digits MODEL \${CMAKE_CURRENT_SOURCE_DIR}/digits.onnx TARGET "llvm -mcpu=skylakx")
TTH_ADD_MODEL (upper
  MODEL m.onnx
  TARGET
    "c -mcpu=cortex-m55 \\
-mattr=+foo")   # a continued line
tth_add_model(vars MODEL m.onnx TARGET "\${MY_TARGET}")
tth_add_model(bare MODEL m.onnx TARGET lvm EXPLAIN)
tth_add_model(br MODEL m.onnx TARGET [=[arm/cortex-m5]=])
tth_add_model(esc MODEL m.onnx TARGET "c -mcpu=cortex\\-m55x")
if(FOO AND (BAR OR BAZ))
  tth_add_model(nested MODEL m.onnx TARGET "c")
endif()
`;

test('only the real calls are found, with their values and places', () => {
  const ts = findTargets(FILE);
  assert.deepEqual(ts.map((t) => [t.model, t.value, t.variables]), [
    ['digits', 'llvm -mcpu=skylakx', false],
    ['upper', 'c -mcpu=cortex-m55 -mattr=+foo', false],
    ['vars', '${MY_TARGET}', true],
    ['bare', 'lvm', false],
    ['br', 'arm/cortex-m5', false],
    ['esc', 'c -mcpu=cortex-m55x', false],
    ['nested', 'c', false],
  ]);
  for (const t of ts) {
    // every character of the value is where the offsets say (escapes aside)
    for (let i = 0; i < t.value.length; i++) {
      const at = FILE[t.offsets[i]];
      assert.ok(at === t.value[i] || at === '\\', `${t.model}: value[${i}] '${t.value[i]}' is '${at}' in the file`);
    }
  }
});

const F = daemonFixture();

test('problems land on the misspelt characters of the file, with the fixes', async () => {
  const ps = await checkCMake(F.client, FILE);
  const got = ps.map((p) => [p.model, FILE.slice(p.start, p.end), p.fixes.map((f) => `${FILE.slice(f.start, f.end)}->${f.text}`)]);
  assert.deepEqual(got.map((g) => g[0]), ['digits', 'upper', 'bare', 'br', 'esc'], JSON.stringify(got));
  assert.deepEqual(got[0], ['digits', 'skylakx', ['skylakx->skylake']]);
  assert.equal(got[1][1], 'foo');
  assert.deepEqual(got[2], ['bare', 'lvm', ['lvm->llvm']]);
  assert.equal(got[3][1], 'arm/cortex-m5');
  assert.ok((got[3][2] as string[]).includes('arm/cortex-m5->arm/cortex-m55'));
  assert.equal(got[4][1], 'cortex\\-m55x', 'the escaped value is placed on its characters in the file');
  // applying the fix gives a file whose targets all parse
  const fixed = FILE.slice(0, ps[0].fixes[0].start) + ps[0].fixes[0].text + FILE.slice(ps[0].fixes[0].end);
  assert.deepEqual((await checkCMake(F.client, fixed)).map((p) => p.model), ['upper', 'bare', 'br', 'esc']);
});

test('any text of CMake\'s special characters is read without error, each value fully placed', () => {
  let seed = 1;
  const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
  const alpha = 'tth_add_model( )TARGET"\\\n#[]=${}ab;\t';
  for (let i = 0; i < 20000; i++) {
    let s = '';
    for (let n = Math.floor(rnd() * 80); n > 0; n--) s += alpha[Math.floor(rnd() * alpha.length)];
    for (const t of findTargets(s)) assert.equal(t.offsets.length, t.value.length + 1, JSON.stringify(s));
  }
});
