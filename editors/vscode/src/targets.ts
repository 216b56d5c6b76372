// Targets in the editor: the choices offered by "Compile for target..." (the daemon's recent
// targets, its tags and kinds) and a target string checked with `target/parse`, its problems
// placed on the part of the string they are about, with the daemon's "did you mean" as fixes.
import { Diagnostic, METHOD_NOT_FOUND, RpcError, TthClient } from './client';

export interface TargetChoice {
  target: string;       // what is sent (and shown)
  kind: 'default' | 'recent' | 'tag' | 'kind';
  detail: string;
}

/** The default first, then recent targets (newest first), tags, kinds; each target once. */
export async function targetChoices(client: TthClient, defaultTarget = ''): Promise<TargetChoice[]> {
  const out: TargetChoice[] = [];
  const seen = new Set<string>();
  const add = (c: TargetChoice) => {
    if (!c.target || seen.has(c.target)) return;
    seen.add(c.target);
    out.push(c);
  };
  if (defaultTarget) add({ target: defaultTarget, kind: 'default', detail: 'the tth.defaultTarget setting' });
  const [recent, tags, kinds] = await Promise.all([
    client.request('targets/recent').catch((e: RpcError) => {
      if (e.code === METHOD_NOT_FOUND) return { targets: [] }; // an older daemon
      throw e;
    }),
    client.request('tags/list'),
    client.request('targets/list'),
  ]);
  for (const r of recent.targets ?? [])
    add({ target: r.target, kind: 'recent', detail: `${r.string} (last: ${r.model ?? '?'}, used ${r.uses}x)` });
  for (const t of tags.tags ?? [])
    add({ target: t.name, kind: 'tag', detail: [t.doc, t.aliases?.length ? `aliases: ${t.aliases.join(', ')}` : ''].filter(Boolean).join('; ') });
  for (const k of kinds.kinds ?? [])
    add({ target: k.kind, kind: 'kind', detail: `${k.doc ?? ''} (plugin ${k.plugin})` });
  return out;
}

/** A problem placed on [start, end) of the target string. */
export interface TargetProblem {
  start: number;
  end: number;
  severity: number;       // LSP's
  code: string;
  message: string;
  hint: string;
  fixes: { start: number; end: number; text: string }[]; // replacements from "did you mean"
}

export type TargetCheck =
  | { ok: true; canonical: string; kinds: { kind: string; plugin: string }[]; problems: TargetProblem[] }
  | { ok: false; problems: TargetProblem[] };

/** The names a hint proposes: "did you mean 'x'?" or "did you mean one of 'a', 'b'?". */
export function suggestions(hint: string): string[] {
  const m = /did you mean (?:one of )?(.*)\?\s*$/.exec(hint);
  if (!m) return [];
  return [...m[1].matchAll(/'([^']*)'/g)].map((x) => x[1]);
}

/** Where a diagnostic of the target string is: its `location` (the offending part, as tthd gives
 *  it: "lvm", "-mcpu=skylakx") found in the string, narrowed to the word the message quotes
 *  ('skylakx'), and the replacements of that word the hint proposes. */
export function placeProblem(target: string, d: Diagnostic): TargetProblem {
  let start = 0;
  let end = target.length;
  let loc = d.location ?? '';
  const inTarget = /^'(.*)' in target '.*'$/s.exec(loc);
  if (inTarget) loc = inTarget[1];
  const at = loc ? target.indexOf(loc) : -1;
  if (at >= 0) {
    start = at;
    end = at + loc.length;
  }
  // the word the message names inside the location; of several, the last ("attribute
  // 'num-cores' ... takes an integer, not 'abc'": the value is what to change)
  const words = [...d.message.matchAll(/'([^']+)'/g)].map((q) => q[1]).filter((q) => target.slice(start, end).includes(q));
  const word = words[words.length - 1];
  if (word !== undefined && word.length < end - start) {
    start += target.slice(start, end).indexOf(word);
    end = start + word.length;
  }
  const fixes = suggestions(d.hint ?? '').map((text) => ({ start, end, text }));
  return { start, end, severity: d.severity || 1, code: d.code, message: d.message, hint: d.hint ?? '', fixes };
}

/** Check a target with the daemon; a refused target's problems are placed in the string. */
export async function checkTarget(client: TthClient, target: string, signal?: AbortSignal): Promise<TargetCheck> {
  if (target.trim() === '')
    return { ok: false, problems: [{ start: 0, end: 0, severity: 1, code: 'EPARSE', message: 'the target is empty', hint: 'give a kind or a tag, such as llvm or arm/cortex-m55', fixes: [] }] };
  try {
    const r = await client.request('target/parse', { target }, { signal });
    const problems = (r.diagnostics ?? []).map((d: Diagnostic) => placeProblem(target, d));
    return { ok: true, canonical: r.string, kinds: r.kinds ?? [], problems };
  } catch (e) {
    if (!(e instanceof RpcError) || e.code === 0 || e.code === -32800) throw e;
    return { ok: false, problems: e.diagnostics.map((d) => placeProblem(target, d)) };
  }
}

/** One line for a problem: the message, and the hint unless it only repeats the fixes. */
export function problemText(p: TargetProblem): string {
  return p.hint ? `${p.message} (${p.hint})` : p.message;
}

/** What a hover over a target says: its canonical string and each kind with its plugin, or its
 *  problems (Markdown). */
export function targetHover(target: string, r: TargetCheck): string {
  if (!r.ok) return r.problems.map((p) => `**tth**: ${problemText(p)}`).join('\n\n');
  const kinds = r.kinds.map((k) => `\`${k.kind}\` (plugin ${k.plugin})`).join(', ');
  return `**tth target** \`${target}\`\n\ncanonical: \`${r.canonical}\`\n\nkinds: ${kinds}`;
}
