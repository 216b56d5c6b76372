// The model page (the custom editor's webview) in a real browser, Debian's headless chromium:
// the model's tables against the summary, the compile report of the artifact running in its
// frame under the page's content security policy (its script allowed by hash, and refused when
// the hash is not its own), no console error, and screenshots to look at
// (TTH_EDITOR_SCREENSHOTS=DIR keeps copies).
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import puppeteer, { Browser, Page } from 'puppeteer-core';
import { summarize } from '../src/onnx';
import { CompileView, esc, renderModelPage, scriptHashes } from '../src/report';
import { compileToFile } from '../src/workflow';
import { daemonFixture, DIGITS, refusedModel } from './support';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
let browser: Browser;
let ok: CompileView;
const F = daemonFixture({
  setup: async (f) => {
    ok = await compileToFile(f.client, { modelPath: DIGITS, target: 'llvm', out: path.join(f.work, 'digits.tar'), explain: true });
    assert.equal(ok.state, 'ok');
    browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  },
  teardown: async () => { await browser?.close(); },
});

/** Open an HTML text in a tab; the tab and the console messages and page errors it had. */
async function open(html: string, name: string): Promise<{ page: Page; messages: string[] }> {
  const file = path.join(F.work, `${name}.html`);
  fs.writeFileSync(file, html);
  const page = await browser.newPage();
  await page.setViewport({ width: 1100, height: 1400 });
  const messages: string[] = [];
  page.on('console', (m) => messages.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => messages.push(`pageerror: ${(e as Error).message}`));
  await page.goto(`file://${file}`, { waitUntil: 'load' });
  await page.waitForFunction(() => document.body.dataset.ready === '1', { timeout: 10000 });
  return { page, messages };
}

async function screenshot(page: Page, name: string): Promise<void> {
  const dir = path.join(__dirname, 'screenshots');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${name}.png`);
  await page.screenshot({ path: file as `${string}.png`, fullPage: true });
  assert.ok(fs.statSync(file).size > 10000, 'a screenshot with something on it');
  const keep = process.env.TTH_EDITOR_SCREENSHOTS;
  if (keep) {
    fs.mkdirSync(keep, { recursive: true });
    fs.copyFileSync(file, path.join(keep, `${name}.png`));
  }
}

const rows = (page: Page, sel: string) => page.$$eval(`${sel} tbody tr`, (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));

test('the model and its compile report: tables, the report running in its frame, no console message', async () => {
  const bytes = fs.readFileSync(DIGITS);
  const summary = summarize(bytes);
  const html = renderModelPage({ file: DIGITS, fileBytes: bytes.length, summary, compile: ok }, 'bm9uY2Vub25jZQ==');
  const { page, messages } = await open(html, 'model-digits');
  assert.deepEqual(await rows(page, '#io'), [['input', 'image', 'float32 [1, 1, 8, 8]'], ['output', 'probabilities', 'float32 [1, 10]']]);
  const ops = await rows(page, '#ops');
  assert.deepEqual(ops.map((r) => [r[0], Number(r[2])]), summary.operators.map((o) => [o.op, o.count]));
  assert.equal(await page.$eval('#compile', (e) => (e as HTMLElement).dataset.state), 'ok');
  assert.match(await page.$eval('dd[data-fact="canonical"]', (e) => e.textContent ?? ''), /^llvm /);
  const frame = await (await page.$('iframe#report'))!.contentFrame();
  assert.ok(frame, 'the report frame');
  await frame!.waitForFunction(() => document.body.dataset.ready === '1', { timeout: 10000 });
  const layers = await frame!.$$eval('#layers tbody tr', (trs) => trs.length);
  assert.ok(layers >= 5, `the report's per-layer table has ${layers} rows`);
  assert.deepEqual(messages, [], 'no console message');
  await screenshot(page, 'model-digits');
  await page.close();
});

test('the policy holds: a report whose script is not the hashed one does not run', async () => {
  const bytes = fs.readFileSync(DIGITS);
  const tampered = { ...ok, reportHtml: ok.reportHtml!.replace(/<script>/, '<script>window.tampered = 1;') };
  const page0 = renderModelPage({ file: DIGITS, fileBytes: bytes.length, summary: summarize(bytes), compile: ok }, 'bm9uY2U=');
  // the page of the genuine report, with the tampered report put in its frame
  const html = page0.replace(esc(ok.reportHtml!), esc(tampered.reportHtml));
  assert.notEqual(html, page0);
  assert.notDeepEqual(scriptHashes(tampered.reportHtml), scriptHashes(ok.reportHtml!));
  const { page, messages } = await open(html, 'tampered');
  const frame = await (await page.$('iframe#report'))!.contentFrame();
  await new Promise((r) => setTimeout(r, 500));
  assert.notEqual(await frame!.evaluate(() => document.body.dataset.ready), '1', 'the script did not run');
  assert.ok(messages.some((m) => /Content Security Policy/.test(m)), `the browser says why: ${messages}`);
  await page.close();
});

test('a refused model: its problem, naming the node, on the page', async () => {
  const model = refusedModel(F.work);
  const failed = await compileToFile(F.client, { modelPath: model, target: 'llvm', out: path.join(F.work, 'r.tar'), explain: false });
  const bytes = fs.readFileSync(model);
  const html = renderModelPage({ file: model, fileBytes: bytes.length, summary: summarize(bytes), compile: failed }, 'bm9uY2U=');
  const { page, messages } = await open(html, 'model-refused');
  assert.equal(await page.$eval('#compile', (e) => (e as HTMLElement).dataset.state), 'failed');
  const li = await page.$eval('#compile li', (e) => ({ node: (e as HTMLElement).dataset.node, text: e.textContent }));
  assert.equal(li.node, 'gelu_7');
  assert.match(li.text ?? '', /operator 'Gelu' is not in opset 17/);
  assert.ok(await page.$('#compile-button'), 'a button to compile again');
  assert.deepEqual(messages, []);
  await screenshot(page, 'model-refused');
  await page.close();
});

test('a file that is not a model says so', async () => {
  const html = renderModelPage({ file: '/x/broken.onnx', fileBytes: 5, summaryError: 'no graph: not an ONNX model' }, 'bm9uY2U=');
  const { page, messages } = await open(html, 'broken');
  assert.match(await page.$eval('#model', (e) => e.textContent ?? ''), /cannot be read as an ONNX model: no graph/);
  assert.deepEqual(messages, []);
  await page.close();
});
