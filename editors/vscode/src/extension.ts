// The VS Code side of tth (docs/editor.md): commands, the status bar, the Problems panel, the
// model page (a read-only custom editor) and the "tth" view. Everything below the VS Code API is
// in the other modules, tested against a real tthd (editors/vscode/test).
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import { RpcError, TthClient } from './client';
import { checkCMake, findTargets } from './cmake';
import { DaemonConnection, DaemonSettings, DaemonState } from './daemon';
import { ModelProblem } from './diagnostics';
import { OnnxError, summarize } from './onnx';
import { CompileView, humanBytes, ModelView, renderModelPage } from './report';
import { checkTarget, problemText, targetChoices, targetHover } from './targets';
import { artifactPath, compileToFile, previousArtifact } from './workflow';

const SEVERITY = [vscode.DiagnosticSeverity.Error, vscode.DiagnosticSeverity.Error, vscode.DiagnosticSeverity.Warning,
  vscode.DiagnosticSeverity.Information, vscode.DiagnosticSeverity.Hint];

function settings(): DaemonSettings & { defaultTarget: string; outputFolder: string; explain: boolean } {
  const c = vscode.workspace.getConfiguration('tth');
  return {
    socket: c.get<string>('socket', ''),
    tthctl: c.get<string>('tthctlPath', 'tthctl') || 'tthctl',
    defaultTarget: c.get<string>('defaultTarget', ''),
    outputFolder: c.get<string>('outputFolder', ''),
    explain: c.get<boolean>('explain', true),
  };
}

let daemon: DaemonConnection;
let modelProblems: vscode.DiagnosticCollection;
let cmakeProblems: vscode.DiagnosticCollection;
const cmakeFixes = new Map<string, { range: vscode.Range; message: string; fixes: { range: vscode.Range; text: string }[] }[]>();
const compiles = new Map<string, CompileView>(); // model file -> its last compile from here
const pages = new Map<string, Set<vscode.WebviewPanel>>();
let tree: DaemonTree;

export function activate(context: vscode.ExtensionContext): void {
  daemon = new DaemonConnection(settings());
  modelProblems = vscode.languages.createDiagnosticCollection('tth');
  cmakeProblems = vscode.languages.createDiagnosticCollection('tth-cmake');
  const status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 10);
  status.command = 'tth.reconnect';
  status.show();
  tree = new DaemonTree();
  daemon.on('state', (s: DaemonState) => {
    showState(status, s);
    tree.refresh();
    if (s.state === 'up') for (const d of vscode.workspace.textDocuments) scheduleCMake(d);
  });
  showState(status, daemon.state);
  daemon.retryNow();

  context.subscriptions.push(
    modelProblems, cmakeProblems, status,
    { dispose: () => daemon.dispose() },
    vscode.commands.registerCommand('tth.compile', (uri?: vscode.Uri) => compileCommand(uri)),
    vscode.commands.registerCommand('tth.openModel', (uri: vscode.Uri) => vscode.commands.executeCommand('vscode.openWith', uri, 'tth.model')),
    vscode.commands.registerCommand('tth.refresh', () => tree.refresh()),
    vscode.commands.registerCommand('tth.clearCache', clearCache),
    vscode.commands.registerCommand('tth.reconnect', () => daemon.retryNow()),
    vscode.window.registerTreeDataProvider('tth.daemon', tree),
    vscode.window.registerCustomEditorProvider('tth.model', new ModelEditor(), { webviewOptions: { retainContextWhenHidden: true } }),
    vscode.workspace.onDidOpenTextDocument(scheduleCMake),
    vscode.workspace.onDidChangeTextDocument((e) => scheduleCMake(e.document)),
    vscode.workspace.onDidCloseTextDocument((d) => { cmakeProblems.delete(d.uri); cmakeFixes.delete(d.uri.toString()); }),
    vscode.workspace.onDidChangeConfiguration((e) => { if (e.affectsConfiguration('tth')) daemon.reconfigure(settings()); }),
    vscode.languages.registerCodeActionsProvider(CMAKE_FILES, { provideCodeActions: cmakeCodeActions },
      { providedCodeActionKinds: [vscode.CodeActionKind.QuickFix] }),
    vscode.languages.registerHoverProvider(CMAKE_FILES, { provideHover: cmakeHover }),
  );
  for (const d of vscode.workspace.textDocuments) scheduleCMake(d);
}

export function deactivate(): void {
  daemon?.dispose();
}

function showState(item: vscode.StatusBarItem, s: DaemonState): void {
  if (s.state === 'up') {
    item.text = `$(check) tthd ${s.version}`;
    item.tooltip = `tthd ${s.version} on ${daemon.socketPath}`;
  } else if (s.state === 'connecting') {
    item.text = '$(sync~spin) tthd';
    item.tooltip = `connecting to ${daemon.socketPath}`;
  } else {
    item.text = '$(debug-disconnect) tthd';
    item.tooltip = `tthd is not running: ${s.reason}. It starts when you compile; click to connect now.`;
  }
}

async function client(): Promise<TthClient> {
  try {
    return await daemon.client();
  } catch (e) {
    throw new Error(`cannot reach tthd on ${daemon.socketPath}: ${(e as Error).message}`);
  }
}

// ---- Compile for target... -----------------------------------------------------------------

function activeModel(): vscode.Uri | undefined {
  const tab = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
  if (tab instanceof vscode.TabInputCustom && tab.uri.path.endsWith('.onnx')) return tab.uri;
  const doc = vscode.window.activeTextEditor?.document.uri;
  return doc?.path.endsWith('.onnx') ? doc : undefined;
}

/** The quick pick: choices from the daemon, free text checked as typed. */
async function pickTarget(c: TthClient): Promise<string | undefined> {
  const cfg = settings();
  const choices = await targetChoices(c, cfg.defaultTarget);
  const base: vscode.QuickPickItem[] = [];
  let section = '';
  for (const ch of choices) {
    const label = { default: 'default', recent: 'recent', tag: 'tags', kind: 'kinds' }[ch.kind];
    if (label !== section) {
      base.push({ label, kind: vscode.QuickPickItemKind.Separator });
      section = label;
    }
    base.push({ label: ch.target, detail: ch.detail });
  }
  const qp = vscode.window.createQuickPick();
  qp.title = 'Compile for target';
  qp.placeholder = 'a target (llvm -mcpu=cortex-a72), a tag (arm/cortex-m55), or pick one';
  qp.matchOnDetail = true;
  qp.ignoreFocusOut = true; // a long target typed is not lost to a click elsewhere (Escape closes)
  qp.items = base;
  let typed: vscode.QuickPickItem[] = [];
  let seq = 0;
  let timer: NodeJS.Timeout | undefined;
  qp.onDidChangeValue((value) => {
    if (timer) clearTimeout(timer);
    const mine = ++seq;
    if (!value.trim()) {
      typed = [];
      qp.items = base;
      return;
    }
    typed = [{ label: value, description: 'checking...', alwaysShow: true }];
    qp.items = [...typed, ...base];
    timer = setTimeout(async () => {
      qp.busy = true;
      const r = await checkTarget(c, value).catch((e: Error) => ({ ok: false as const, problems: [{ start: 0, end: 0, severity: 1, code: '', message: e.message, hint: '', fixes: [] }] }));
      if (mine !== seq) return;
      qp.busy = false;
      if (r.ok) {
        typed = [{ label: value, description: '$(check) valid', detail: r.canonical, alwaysShow: true }];
      } else {
        const p = r.problems[0];
        typed = [{ label: value, description: '$(error) not a target', detail: problemText(p), alwaysShow: true }];
        for (const f of r.problems.flatMap((x) => x.fixes)) {
          const fixed = value.slice(0, f.start) + f.text + value.slice(f.end);
          typed.push({ label: fixed, description: `did you mean '${f.text}'?`, alwaysShow: true });
        }
      }
      qp.items = [...typed, ...base];
    }, 250);
  });
  return new Promise((resolve) => {
    qp.onDidAccept(async () => {
      const pick = (qp.selectedItems[0] ?? qp.activeItems[0])?.label ?? qp.value;
      if (!pick) return;
      const r = await checkTarget(c, pick).catch(() => null);
      if (r && !r.ok) {
        qp.value = pick; // shows the problem and its fixes
        return;
      }
      resolve(pick);
      qp.hide();
    });
    qp.onDidHide(() => { resolve(undefined); qp.dispose(); });
    qp.show();
  });
}

async function compileCommand(uri?: vscode.Uri): Promise<CompileView | undefined> {
  const model = uri ?? activeModel() ?? (await vscode.window.showOpenDialog({ filters: { 'ONNX models': ['onnx'] }, canSelectMany: false }))?.[0];
  if (!model) return undefined;
  let c: TthClient;
  try {
    c = await client();
  } catch (e) {
    vscode.window.showErrorMessage((e as Error).message);
    return undefined;
  }
  const target = await pickTarget(c);
  if (!target) return undefined;
  const cfg = settings();
  const folder = vscode.workspace.getWorkspaceFolder(model)?.uri.fsPath;
  const out = artifactPath(model.fsPath, cfg.outputFolder, folder);
  setCompile(model, { state: 'running', target, problems: [] });
  const view = await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: `tth: compiling ${model.path.split('/').pop()} for ${target}`, cancellable: true },
    async (progress, token) => {
      const abort = new AbortController();
      token.onCancellationRequested(() => abort.abort());
      let last = 0;
      try {
        return await compileToFile(c, {
          modelPath: model.fsPath, target, out, explain: cfg.explain, signal: abort.signal,
          onProgress: (p) => {
            const pc = Math.max(last, p.percentage ?? last);
            progress.report({ message: p.stage, increment: pc - last });
            last = pc;
          },
        });
      } catch (e) {
        const cancelled = e instanceof RpcError && e.code === -32800;
        return { state: 'failed', target, problems: [{ severity: cancelled ? 3 : 1, code: cancelled ? 'ECANCELLED' : 'EIO', message: cancelled ? 'cancelled' : (e as Error).message, location: '', hint: '' }] } as CompileView;
      }
    });
  setCompile(model, view);
  tree.refresh();
  if (view.state === 'ok') {
    const act = await vscode.window.showInformationMessage(`tth: wrote ${vscode.workspace.asRelativePath(out)} (${humanBytes(view.artifactBytes ?? 0)}, cache ${view.cache}, ${view.seconds?.toFixed(2)} s)`, 'Show model');
    if (act) vscode.commands.executeCommand('vscode.openWith', model, 'tth.model');
  } else if (view.problems[0]?.code !== 'ECANCELLED') {
    const act = await vscode.window.showErrorMessage(`tth: ${view.problems[0]?.message ?? 'the compile failed'}`, 'Show problems');
    if (act) vscode.commands.executeCommand('workbench.actions.view.problems');
  }
  return view;
}

function setCompile(model: vscode.Uri, view: CompileView): void {
  compiles.set(model.toString(), view);
  if (view.state !== 'running') modelProblems.set(model, view.problems.map((p) => toDiagnostic(p)));
  for (const panel of pages.get(model.toString()) ?? []) renderPage(model, panel);
}

function toDiagnostic(p: ModelProblem): vscode.Diagnostic {
  // the message names the place (the node, the plugin and hook) and the hint (diagnostics.ts)
  const d = new vscode.Diagnostic(new vscode.Range(0, 0, 0, 0), p.message, SEVERITY[p.severity] ?? vscode.DiagnosticSeverity.Error);
  d.source = 'tth';
  d.code = p.code;
  return d;
}

// ---- CMake files ---------------------------------------------------------------------------

const cmakeTimers = new Map<string, NodeJS.Timeout>();
const cmakeAborts = new Map<string, AbortController>();

function isCMake(d: vscode.TextDocument): boolean {
  const name = d.uri.path.split('/').pop() ?? '';
  return d.uri.scheme === 'file' && (name === 'CMakeLists.txt' || name.endsWith('.cmake') || d.languageId === 'cmake');
}

function scheduleCMake(d: vscode.TextDocument): void {
  if (!isCMake(d)) return;
  const key = d.uri.toString();
  clearTimeout(cmakeTimers.get(key));
  cmakeTimers.set(key, setTimeout(() => checkCMakeDocument(d), 300));
}

async function checkCMakeDocument(d: vscode.TextDocument): Promise<void> {
  const key = d.uri.toString();
  cmakeAborts.get(key)?.abort();
  const abort = new AbortController();
  cmakeAborts.set(key, abort);
  const version = d.version;
  let c: TthClient;
  try {
    c = await client();
  } catch {
    return; // the status bar says the daemon is down; nothing to check with
  }
  const problems = await checkCMake(c, d.getText(), abort.signal).catch(() => null);
  if (!problems || d.version !== version || abort.signal.aborted) return;
  const range = (s: number, e: number) => new vscode.Range(d.positionAt(s), d.positionAt(e));
  const fixes: typeof cmakeFixes extends Map<string, infer V> ? V : never = [];
  const diags = problems.map((p) => {
    const r = range(p.start, p.end);
    const diag = new vscode.Diagnostic(r, `${problemText(p)} — target of tth_add_model(${p.model})`, SEVERITY[p.severity] ?? vscode.DiagnosticSeverity.Error);
    diag.source = 'tth';
    diag.code = p.code;
    fixes.push({ range: r, message: diag.message, fixes: p.fixes.map((f) => ({ range: range(f.start, f.end), text: f.text })) });
    return diag;
  });
  cmakeFixes.set(key, fixes);
  cmakeProblems.set(d.uri, diags);
}

const CMAKE_FILES: vscode.DocumentSelector = [{ pattern: '**/CMakeLists.txt' }, { pattern: '**/*.cmake' }, { language: 'cmake' }];

/** Over a TARGET string: its canonical form and kinds, as the daemon parses it. */
async function cmakeHover(doc: vscode.TextDocument, pos: vscode.Position, token: vscode.CancellationToken): Promise<vscode.Hover | undefined> {
  const at = doc.offsetAt(pos);
  const t = findTargets(doc.getText()).find((x) => !x.variables && at >= x.start && at <= x.end);
  if (!t) return undefined;
  const abort = new AbortController();
  token.onCancellationRequested(() => abort.abort());
  try {
    const r = await checkTarget(await client(), t.value, abort.signal);
    return new vscode.Hover(new vscode.MarkdownString(targetHover(t.value, r)), new vscode.Range(doc.positionAt(t.start), doc.positionAt(t.end)));
  } catch {
    return undefined; // no daemon: the status bar says so
  }
}

function cmakeCodeActions(doc: vscode.TextDocument, _range: vscode.Range, ctx: vscode.CodeActionContext): vscode.CodeAction[] {
  const known = cmakeFixes.get(doc.uri.toString()) ?? [];
  const out: vscode.CodeAction[] = [];
  for (const diag of ctx.diagnostics) {
    if (diag.source !== 'tth') continue;
    const k = known.find((x) => x.range.isEqual(diag.range) && x.message === diag.message);
    for (const f of k?.fixes ?? []) {
      const a = new vscode.CodeAction(`Change to '${f.text}'`, vscode.CodeActionKind.QuickFix);
      a.edit = new vscode.WorkspaceEdit();
      a.edit.replace(doc.uri, f.range, f.text);
      a.diagnostics = [diag];
      a.isPreferred = k!.fixes.length === 1;
      out.push(a);
    }
  }
  return out;
}

// ---- the model page ------------------------------------------------------------------------

// the summaries of the model files shown, by file, with the mtime and size they were read at: a
// page drawn again (a compile starting, ending) reads the file again only when it changed
const summaries = new Map<string, { mtimeMs: number; view: Pick<ModelView, 'fileBytes' | 'summary' | 'summaryError'> }>();

function modelFacts(file: string): Pick<ModelView, 'fileBytes' | 'summary' | 'summaryError'> {
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch (e) {
    return { fileBytes: 0, summaryError: `cannot read the file: ${(e as Error).message}` };
  }
  const known = summaries.get(file);
  if (known && known.mtimeMs === st.mtimeMs && known.view.fileBytes === st.size) return known.view;
  let view: Pick<ModelView, 'fileBytes' | 'summary' | 'summaryError'>;
  try {
    const bytes = fs.readFileSync(file);
    view = { fileBytes: bytes.length, summary: summarize(bytes) };
  } catch (e) {
    view = { fileBytes: st.size, summaryError: e instanceof OnnxError ? e.message : `cannot read the file: ${(e as Error).message}` };
  }
  summaries.set(file, { mtimeMs: st.mtimeMs, view });
  return view;
}

function renderPage(model: vscode.Uri, panel: vscode.WebviewPanel): void {
  const view: ModelView = { file: model.fsPath, ...modelFacts(model.fsPath) };
  let c = compiles.get(model.toString());
  if (!c) {
    const folder = vscode.workspace.getWorkspaceFolder(model)?.uri.fsPath;
    c = previousArtifact(model.fsPath, artifactPath(model.fsPath, settings().outputFolder, folder));
  }
  view.compile = c;
  panel.webview.html = renderModelPage(view, crypto.randomBytes(16).toString('base64'), panel.webview.cspSource);
}

class ModelEditor implements vscode.CustomReadonlyEditorProvider {
  openCustomDocument(uri: vscode.Uri): vscode.CustomDocument {
    return { uri, dispose: () => undefined };
  }

  resolveCustomEditor(doc: vscode.CustomDocument, panel: vscode.WebviewPanel): void {
    const key = doc.uri.toString();
    panel.webview.options = { enableScripts: true, localResourceRoots: [] };
    const set = pages.get(key) ?? new Set();
    set.add(panel);
    pages.set(key, set);
    const watcher = vscode.workspace.createFileSystemWatcher(new vscode.RelativePattern(vscode.Uri.joinPath(doc.uri, '..'), doc.uri.path.split('/').pop()!));
    watcher.onDidChange(() => renderPage(doc.uri, panel));
    panel.webview.onDidReceiveMessage((m) => { if (m?.command === 'compile') compileCommand(doc.uri); });
    panel.onDidDispose(() => {
      set.delete(panel);
      watcher.dispose();
      if (!set.size) summaries.delete(doc.uri.fsPath);
    });
    renderPage(doc.uri, panel);
  }
}

// ---- the tth view --------------------------------------------------------------------------

async function clearCache(): Promise<void> {
  try {
    const c = await client();
    const r = await c.request('cache/clear');
    vscode.window.showInformationMessage(`tth: removed ${r.removedEntries} cached artifact${r.removedEntries === 1 ? '' : 's'} (${humanBytes(r.removedBytes)})`);
  } catch (e) {
    vscode.window.showErrorMessage(`tth: ${(e as Error).message}`);
  }
  tree.refresh();
}

class DaemonTree implements vscode.TreeDataProvider<vscode.TreeItem> {
  private changed = new vscode.EventEmitter<void>();
  readonly onDidChangeTreeData = this.changed.event;

  refresh(): void {
    this.changed.fire();
  }

  getTreeItem(e: vscode.TreeItem): vscode.TreeItem {
    return e;
  }

  async getChildren(e?: vscode.TreeItem): Promise<vscode.TreeItem[]> {
    const s = daemon.state;
    if (s.state !== 'up') {
      const i = new vscode.TreeItem(s.state === 'connecting' ? 'connecting to tthd...' : `tthd is not running (${s.reason})`);
      i.command = { command: 'tth.reconnect', title: 'Connect' };
      return e ? [] : [i];
    }
    const c = s.client;
    if (e && (e as any).children) return (e as any).children;
    if (e) return [];
    try {
      const [st, pl] = await Promise.all([c.request('status'), c.request('plugins/list')]);
      const d = new vscode.TreeItem(`tthd ${st.version}`, vscode.TreeItemCollapsibleState.Collapsed);
      d.description = `pid ${st.pid}, up ${Math.round(st.uptimeSeconds)} s`;
      (d as any).children = [
        leaf('socket', st.socket), leaf('requests', `${st.requests.served} served, ${st.requests.failed} failed, ${st.requests.active} active`),
        leaf('workers', `${st.workers.alive} alive of ${st.workers.configured}, ${st.workers.busy} busy, ${st.workers.crashed} crashed`),
      ];
      const p = new vscode.TreeItem('plugins', vscode.TreeItemCollapsibleState.Expanded);
      p.description = `${pl.plugins.length} loaded${pl.errors?.length ? `, ${pl.errors.length} refused` : ''}`;
      (p as any).children = [
        ...pl.plugins.map((x: any) => leaf(x.name, `${x.version} — kind ${x.kind}`, x.path)),
        ...(pl.errors ?? []).map((x: any) => leaf(x.path.split('/').pop(), `refused: ${x.message}`, x.hint)),
      ];
      const cache = new vscode.TreeItem('cache');
      cache.contextValue = 'cache';
      cache.description = `${st.cache.entries} artifact${st.cache.entries === 1 ? '' : 's'}, ${humanBytes(st.cache.bytes)} of ${humanBytes(st.cache.maxBytes)}; ${st.cache.hits} hits, ${st.cache.misses} misses`;
      cache.tooltip = st.cacheDir;
      return [d, cache, p];
    } catch (err) {
      return [leaf('error', (err as Error).message)];
    }
  }
}

function leaf(label: string, description: string, tooltip?: string): vscode.TreeItem {
  const i = new vscode.TreeItem(label);
  i.description = description;
  i.tooltip = tooltip ?? description;
  return i;
}
