// The model page of the custom editor (docs/editor.md): an ONNX file's inputs, outputs and
// operators, and its last compile from the editor: target, cache, artifact, problems, the
// artifact's files and the compile report the artifact carries (explain/report.html, the page of
// docs/profiling.md), shown in a frame of the page. One self-contained HTML text: it loads
// nothing, its content security policy allows only its own script (by nonce) and the report's
// (by hash: the report's frame inherits the policy).
import { createHash } from 'node:crypto';
import { ModelProblem } from './diagnostics';
import { describeValue, ModelSummary } from './onnx';

export interface CompileView {
  state: 'ok' | 'failed' | 'running';
  target: string;
  canonical?: string;
  cache?: string;                 // hit | miss
  key?: string;
  artifactPath?: string;
  artifactBytes?: number;
  seconds?: number;
  problems: ModelProblem[];
  files?: { name: string; size: number }[];
  reportHtml?: string;            // explain/report.html of the artifact
  workspaceBytes?: number;        // metadata.memory.plan's workspace
}

export interface ModelView {
  file: string;
  fileBytes: number;
  summary?: ModelSummary;
  summaryError?: string;
  compile?: CompileView;
}

export const esc = (s: unknown): string =>
  String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

export function humanBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const u = ['KiB', 'MiB', 'GiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${u[i]}`;
}

/** The CSP sources ('sha256-...') of the executable inline scripts of an HTML page. */
export function scriptHashes(page: string): string[] {
  const out: string[] = [];
  for (const m of page.matchAll(/<script(\s[^>]*)?>([\s\S]*?)<\/script>/gi)) {
    const type = /\btype\s*=\s*["']?([^"'\s>]+)/i.exec(m[1] ?? '')?.[1]?.toLowerCase();
    if (type && type !== 'text/javascript' && type !== 'module' && type !== 'application/javascript') continue;
    out.push(`'sha256-${createHash('sha256').update(m[2], 'utf8').digest('base64')}'`);
  }
  return out;
}

const SEVERITY = ['', 'error', 'warning', 'info', 'hint'];

function problemsList(ps: ModelProblem[]): string {
  if (!ps.length) return '';
  return `<ul class="problems">${ps.map((p) => `<li class="${SEVERITY[p.severity] ?? 'error'}" data-code="${esc(p.code)}"${p.node ? ` data-node="${esc(p.node)}"` : ''}>`
    + `<b>${esc(SEVERITY[p.severity] ?? 'error')}</b> ${esc(p.message)}</li>`).join('')}</ul>`;
}

function table(id: string, head: string[], rows: (string | number)[][]): string {
  return `<table id="${id}"><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>`
    + rows.map((r) => `<tr>${r.map((c) => `<td>${esc(c)}</td>`).join('')}</tr>`).join('') + '</tbody></table>';
}

function modelSection(v: ModelView): string {
  if (!v.summary) return `<section id="model"><p class="problems error">This file cannot be read as an ONNX model: ${esc(v.summaryError ?? 'unknown error')}</p></section>`;
  const s = v.summary;
  const io = [
    ...s.inputs.map((x) => ['input', x.name, describeValue(x)]),
    ...s.outputs.map((x) => ['output', x.name, describeValue(x)]),
  ];
  const facts = [
    ['graph', s.graphName || '(unnamed)'],
    ['producer', s.producer || '(not given)'],
    ['opsets', s.opsets.map((o) => `${o.domain || 'ai.onnx'} ${o.version}`).join(', ')],
    ['IR version', String(s.irVersion)],
    ['nodes', String(s.nodes)],
    ['initializers', `${s.initializers} (${humanBytes(s.parameterBytes)} in the file)`],
    ['file', humanBytes(v.fileBytes)],
  ];
  return `<section id="model"><h2>Model</h2>
<dl>${facts.map(([k, x]) => `<dt>${esc(k)}</dt><dd data-fact="${esc(k)}">${esc(x)}</dd>`).join('')}</dl>
<h3>Inputs and outputs</h3>${table('io', ['', 'name', 'type'], io)}
<h3>Operators</h3>${table('ops', ['operator', 'domain', 'nodes'], s.operators.map((o) => [o.op, o.domain || 'ai.onnx', o.count]))}
</section>`;
}

function compileSection(c: CompileView | undefined): string {
  if (!c) return `<section id="compile"><h2>Compile</h2><p>Not compiled from the editor yet: <button id="compile-button">Compile for target...</button></p></section>`;
  if (c.state === 'running') return `<section id="compile" data-state="running"><h2>Compile</h2><p>Compiling for <code>${esc(c.target)}</code>...</p></section>`;
  if (c.state === 'failed')
    return `<section id="compile" data-state="failed"><h2>Compile</h2><p>The compile for <code>${esc(c.target)}</code> failed:</p>${problemsList(c.problems)}
<p><button id="compile-button">Compile for target...</button></p></section>`;
  const facts = [
    ['target', c.target],
    ['canonical', c.canonical ?? ''],
    ['artifact', `${c.artifactPath ?? ''} (${humanBytes(c.artifactBytes ?? 0)})`],
    ['cache', `${c.cache ?? ''}${c.key ? `, key ${c.key}` : ''}`],
    ['time', c.seconds !== undefined ? `${c.seconds.toFixed(3)} s` : ''],
    ...(c.workspaceBytes !== undefined ? [['workspace', humanBytes(c.workspaceBytes)]] : []),
  ].filter(([, x]) => x);
  const report = c.reportHtml
    ? `<h3>Report</h3><iframe id="report" title="compile report" srcdoc="${esc(c.reportHtml)}"></iframe>`
    : '<p id="no-report">The artifact has no report: compile with the setting tth.explain on to see one here.</p>';
  return `<section id="compile" data-state="ok"><h2>Compile</h2>
<dl>${facts.map(([k, x]) => `<dt>${esc(k)}</dt><dd data-fact="${esc(k)}">${esc(x)}</dd>`).join('')}</dl>
${problemsList(c.problems)}
<p><button id="compile-button">Compile again...</button></p>
${c.files ? `<details><summary>Files of the artifact (${c.files.length})</summary>${table('files', ['file', 'bytes'], c.files.map((f) => [f.name, f.size]))}</details>` : ''}
${report}</section>`;
}

const STYLE = `
body { font-family: var(--vscode-font-family, sans-serif); font-size: var(--vscode-font-size, 13px);
  color: var(--vscode-foreground, #222); background: var(--vscode-editor-background, #fff); margin: 0 16px 24px; }
h1 { font-size: 1.4em; margin: 16px 0 4px; } h2 { font-size: 1.15em; margin-top: 20px; border-bottom: 1px solid var(--vscode-panel-border, #ccc); }
h3 { font-size: 1em; margin: 14px 0 6px; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; margin: 0; } dt { opacity: .75; } dd { margin: 0; word-break: break-all; }
table { border-collapse: collapse; } th, td { text-align: left; padding: 2px 12px 2px 0; } th { opacity: .75; font-weight: 600; }
td:last-child { font-variant-numeric: tabular-nums; }
ul.problems { padding-left: 0; list-style: none; } .problems li { margin: 4px 0; padding: 4px 8px; border-left: 3px solid; }
.error { border-color: var(--vscode-editorError-foreground, #c00); } .warning { border-color: var(--vscode-editorWarning-foreground, #b80); }
button { background: var(--vscode-button-background, #0e639c); color: var(--vscode-button-foreground, #fff); border: 0; padding: 4px 12px; cursor: pointer; }
iframe#report { width: 100%; height: 900px; border: 1px solid var(--vscode-panel-border, #ccc); background: #fff; }
code { font-family: var(--vscode-editor-font-family, monospace); }`;

/** The whole page. `nonce` marks its own script; `cspSource` is the webview's resource origin. */
export function renderModelPage(v: ModelView, nonce: string, cspSource = ''): string {
  const reportScripts = v.compile?.reportHtml ? scriptHashes(v.compile.reportHtml).join(' ') : '';
  const csp = [
    "default-src 'none'",
    `style-src 'unsafe-inline' ${cspSource}`.trim(),
    `img-src data: ${cspSource}`.trim(),
    `script-src 'nonce-${nonce}' ${reportScripts}`.trim(),
    "frame-src 'self' about: data:",
  ].join('; ');
  const name = v.file.split('/').pop() ?? v.file;
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${esc(csp)}">
<meta name="viewport" content="width=device-width">
<title>${esc(name)}</title><style>${STYLE}</style></head>
<body><h1>${esc(name)}</h1><div id="path">${esc(v.file)}</div>
${modelSection(v)}
${compileSection(v.compile)}
<script nonce="${nonce}">
(function () {
  const api = typeof acquireVsCodeApi === 'function' ? acquireVsCodeApi() : null;
  for (const b of document.querySelectorAll('#compile-button'))
    b.addEventListener('click', () => api && api.postMessage({ command: 'compile' }));
  document.body.dataset.ready = '1';
})();
</script></body></html>`;
}
