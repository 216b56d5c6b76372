// The target strings of `tth_add_model(<name> MODEL <file> TARGET "<target>" ...)` calls in
// CMake files (docs/cmake.md), found with CMake's own lexical rules (comments, quoted, bracket
// and unquoted arguments, escapes), each with the place of every character of its value in the
// file, so that a problem the daemon finds in the target lands on the right characters.
import { TthClient } from './client';
import { checkTarget, TargetProblem } from './targets';

export interface CMakeTarget {
  model: string;          // the call's first argument (the model's name)
  value: string;          // the TARGET argument's value, escapes resolved
  offsets: number[];      // offsets[i]: where value[i] is in the file; offsets[value.length]: its end
  start: number;          // the argument's first character in the file (the quote for a quoted one)
  end: number;
  variables: boolean;     // it holds a ${...} reference: its value is only known to CMake
}

interface Arg {
  value: string;
  offsets: number[];
  start: number;
  end: number;
}

const ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', ';': ';' };

class Lexer {
  i = 0;
  constructor(readonly s: string) {}

  /** Skip blanks, newlines and comments. */
  skip(): void {
    const s = this.s;
    while (this.i < s.length) {
      const c = s[this.i];
      if (c === ' ' || c === '\t' || c === '\r' || c === '\n') this.i++;
      else if (c === '#') {
        const b = this.bracketOpen(this.i + 1);
        if (b >= 0) this.i = this.bracketClose(this.i + 1, b).end;
        else while (this.i < s.length && s[this.i] !== '\n') this.i++;
      } else break;
    }
  }

  /** At p a bracket opening "[", "="*, "["? Its level, else -1. */
  bracketOpen(p: number): number {
    if (this.s[p] !== '[') return -1;
    let q = p + 1;
    while (this.s[q] === '=') q++;
    return this.s[q] === '[' ? q - p - 1 : -1;
  }

  /** The bracket's content (after the opening at p of level n) and where it ends. */
  bracketClose(p: number, n: number): { content: number; close: number; end: number } {
    const content = p + n + 2;
    const closer = ']' + '='.repeat(n) + ']';
    const close = this.s.indexOf(closer, content);
    const c = close < 0 ? this.s.length : close;
    return { content, close: c, end: close < 0 ? this.s.length : c + closer.length };
  }

  quoted(): Arg {
    const s = this.s;
    const start = this.i++;
    let value = '';
    const offsets: number[] = [];
    while (this.i < s.length && s[this.i] !== '"') {
      if (s[this.i] === '\\' && this.i + 1 < s.length) {
        const e = s[this.i + 1];
        if (e === '\n') { this.i += 2; continue; } // line continuation
        offsets.push(this.i);
        value += ESCAPES[e] ?? e;
        this.i += 2;
      } else {
        offsets.push(this.i);
        value += s[this.i++];
      }
    }
    offsets.push(this.i);
    if (this.i < s.length) this.i++;
    return { value, offsets, start, end: this.i };
  }

  unquoted(): Arg {
    const s = this.s;
    const start = this.i;
    let value = '';
    const offsets: number[] = [];
    let depth = 0;
    while (this.i < s.length) {
      const c = s[this.i];
      if (' \t\r\n#"'.includes(c)) break;
      if (c === '(') depth++;
      if (c === ')') { if (depth === 0) break; depth--; }
      if (c === '\\' && this.i + 1 < s.length) {
        offsets.push(this.i);
        value += ESCAPES[s[this.i + 1]] ?? s[this.i + 1];
        this.i += 2;
        continue;
      }
      offsets.push(this.i);
      value += c;
      this.i++;
    }
    offsets.push(this.i);
    return { value, offsets, start, end: this.i };
  }

  /** The arguments of the call whose '(' was just read, up to its ')'. */
  args(): Arg[] {
    const out: Arg[] = [];
    for (;;) {
      this.skip();
      if (this.i >= this.s.length) return out;
      const c = this.s[this.i];
      if (c === ')') { this.i++; return out; }
      if (c === '(') { this.i++; this.args(); continue; } // a nested group: not ours
      if (c === '"') { out.push(this.quoted()); continue; }
      const b = this.bracketOpen(this.i);
      if (b >= 0) {
        const start = this.i;
        const r = this.bracketClose(this.i, b);
        let content = r.content;
        if (this.s[content] === '\n') content++; // a newline right after the opening is dropped
        const value = this.s.slice(content, r.close);
        const offsets = [...value].map((_, k) => content + k);
        offsets.push(r.close);
        this.i = r.end;
        out.push({ value, offsets, start, end: r.end });
        continue;
      }
      const a = this.unquoted();
      if (a.end === a.start) { this.i++; continue; } // a stray character: step over it
      out.push(a);
    }
  }
}

/** Every TARGET argument of every tth_add_model call (command names are case-insensitive). */
export function findTargets(text: string): CMakeTarget[] {
  const lx = new Lexer(text);
  const out: CMakeTarget[] = [];
  const ident = /[A-Za-z_][A-Za-z0-9_]*/y;
  while (lx.i < text.length) {
    lx.skip();
    if (lx.i >= text.length) break;
    ident.lastIndex = lx.i;
    const m = ident.exec(text);
    if (!m) {
      // not a command: an argument of something we do not follow, a string, a bracket
      if (text[lx.i] === '"') lx.quoted();
      else if (lx.bracketOpen(lx.i) >= 0) lx.i = lx.bracketClose(lx.i, lx.bracketOpen(lx.i)).end;
      else lx.i++;
      continue;
    }
    lx.i = ident.lastIndex;
    let j = lx.i;
    while (text[j] === ' ' || text[j] === '\t') j++;
    if (text[j] !== '(') continue;
    lx.i = j + 1;
    const args = lx.args();
    if (m[0].toLowerCase() !== 'tth_add_model') continue;
    for (let k = 1; k + 1 < args.length; k++) {
      if (args[k].value !== 'TARGET') continue;
      const a = args[k + 1];
      out.push({ model: args[0]?.value ?? '', value: a.value, offsets: a.offsets, start: a.start, end: a.end,
        variables: /\$\{|\$ENV\{|\$<|@[A-Za-z_]+@/.test(a.value) });
    }
  }
  return out;
}

/** A problem of a CMake file: [start, end) in the file. */
export interface CMakeProblem extends TargetProblem {
  model: string;
  target: string;
}

/** Check every literal TARGET of the file with the daemon (those made of variables are left to
 *  CMake); the problems, placed in the file. */
export async function checkCMake(client: TthClient, text: string, signal?: AbortSignal): Promise<CMakeProblem[]> {
  const out: CMakeProblem[] = [];
  const targets = findTargets(text).filter((t) => !t.variables);
  const checks = await Promise.all(targets.map((t) => checkTarget(client, t.value, signal)));
  targets.forEach((t, i) => {
    for (const p of checks[i].problems) {
      const at = (k: number) => t.offsets[Math.min(k, t.value.length)];
      const empty = t.value.length === 0;
      out.push({
        ...p,
        model: t.model,
        target: t.value,
        start: empty ? t.start : at(p.start),
        end: empty ? t.end : (p.end > p.start ? at(p.end - 1) + 1 : at(p.end)),
        fixes: p.fixes.map((f) => ({ start: at(f.start), end: f.end > f.start ? at(f.end - 1) + 1 : at(f.end), text: f.text })),
      });
    }
  });
  return out;
}
