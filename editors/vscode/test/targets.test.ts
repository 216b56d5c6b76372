// Targets checked as typed: each problem the daemon finds placed on the characters it is about,
// with its "did you mean" as replacements that make a target the daemon accepts; the choices of
// the pick (recent targets after a compile, tags, kinds).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkTarget, placeProblem, suggestions, targetChoices, targetHover } from '../src/targets';
import { daemonFixture, DIGITS } from './support';

const F = daemonFixture();



test('hints are read for their names', () => {
  assert.deepEqual(suggestions("did you mean 'llvm'?"), ['llvm']);
  assert.deepEqual(suggestions("did you mean one of 'arm/cortex-m3', 'arm/cortex-m4', 'arm/cortex-m55'?"), ['arm/cortex-m3', 'arm/cortex-m4', 'arm/cortex-m55']);
  assert.deepEqual(suggestions('export the model with opset 20 or later'), []);
  const p = placeProblem('llvm -mcpux=3', { code: 'EUNKNOWN', severity: 1, message: "unknown attribute 'mcpux' for kind 'llvm'", location: '-mcpux=3', hint: "did you mean 'mcpu'?" });
  assert.deepEqual([p.start, p.end, p.fixes], [6, 11, [{ start: 6, end: 11, text: 'mcpu' }]]);
  const q = placeProblem('x', { code: 'E', severity: 1, message: 'm', location: 'not in the string', hint: '' });
  assert.deepEqual([q.start, q.end], [0, 1], 'a location not found covers the whole string');
});

// typed target, the characters the problem is on, the fix expected among the fixes
const TYPOS: [string, string, string][] = [
  ['lvm -mcpu=skylake', 'lvm', 'llvm'],
  ['llvm -mcpu=skylakx', 'skylakx', 'skylake'],
  ['llvm -mcpux=skylake', 'mcpux', 'mcpu'],
  ['llvm -mtriple=aarch64-linux-gnu -mattr=+neonx', 'neonx', 'neon'],
  ['arm/cortex-m5', 'arm/cortex-m5', 'arm/cortex-m55'],
  ['cmsis-nn,c -mcpu=cortex-m55 -mattr=+foo', 'foo', ''],
];

test('typos are placed on the misspelt word, and each fix is a target the daemon accepts', async () => {
  for (const [target, word, fix] of TYPOS) {
    const r = await checkTarget(F.client, target);
    assert.equal(r.ok, false, `${target} is refused`);
    const p = r.problems[0];
    assert.equal(target.slice(p.start, p.end), word, `${target}: the problem is on '${word}', not '${target.slice(p.start, p.end)}'`);
    assert.equal(p.severity, 1);
    if (!fix) continue;
    assert.ok(p.fixes.some((f) => f.text === fix), `${target}: fixes ${JSON.stringify(p.fixes)} include '${fix}'`);
    const fixed = target.slice(0, p.start) + fix + target.slice(p.end);
    const again = await checkTarget(F.client, fixed);
    assert.equal(again.ok, true, `the fixed target '${fixed}' parses: ${JSON.stringify(again.problems)}`);
  }
});

test('a type error is placed on the value', async () => {
  const r = await checkTarget(F.client, 'llvm -num-cores=abc');
  assert.equal(r.ok, false);
  assert.equal('llvm -num-cores=abc'.slice(r.problems[0].start, r.problems[0].end), 'abc');
  assert.equal(r.problems[0].code, 'ETYPE');
});

test('a valid target gives its canonical string and kinds; an empty one is a problem', async () => {
  const r = await checkTarget(F.client, 'cmsis-nn,c -mcpu=cortex-m55');
  assert.ok(r.ok);
  assert.match(r.canonical, /-mcpu=cortex-m55/);
  assert.deepEqual(r.kinds.map((k) => k.kind).sort(), ['c', 'cmsis-nn']);
  const e = await checkTarget(F.client, '  ');
  assert.equal(e.ok, false);
});

test('choices: the default, then recent targets after compiles, then tags and kinds, each once', async () => {
  let ch = await targetChoices(F.client, 'llvm');
  assert.equal(ch[0].target, 'llvm');
  assert.equal(ch[0].kind, 'default');
  assert.ok(!ch.some((x) => x.kind === 'recent'), 'no recent target before a compile');
  await F.client.compile({ modelPath: DIGITS, target: 'c -mcpu=cortex-m4' });
  await F.client.compile({ modelPath: DIGITS, target: 'c' });
  ch = await targetChoices(F.client, 'llvm');
  const recent = ch.filter((x) => x.kind === 'recent').map((x) => x.target);
  assert.deepEqual(recent, ['c', 'c -mcpu=cortex-m4'], 'newest first');
  assert.ok(ch.some((x) => x.kind === 'tag' && x.target === 'arm/cortex-m55'));
  assert.ok(ch.some((x) => x.kind === 'kind' && x.target === 'ethos-n'));
  const names = ch.map((x) => x.target);
  assert.equal(new Set(names).size, names.length, 'each target once (c is recent, not again a kind)');
});

test('a hover names the canonical target and each kind with its plugin, or the problem', async () => {
  const ok = targetHover('cmsis-nn,c -mcpu=cortex-m55', await checkTarget(F.client, 'cmsis-nn,c -mcpu=cortex-m55'));
  assert.match(ok, /canonical: `.*-mcpu=cortex-m55.*`/);
  assert.match(ok, /`cmsis-nn` \(plugin cmsisnn\)/);
  assert.match(ok, /`c` \(plugin c-host\)/);
  const bad = targetHover('lvm', await checkTarget(F.client, 'lvm'));
  assert.match(bad, /unknown target kind or tag 'lvm' \(did you mean 'llvm'\?\)/);
});
