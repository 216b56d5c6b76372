// A compile's diagnostics as problems of the model file: the message, the hint, and the ONNX node
// and operator when the daemon names one ("node 'gelu_7' (Gelu)"), so that the Problems panel
// says which node of the model was refused and what to do about it.
import { Diagnostic, RpcError } from './client';

export interface ModelProblem {
  severity: number;   // LSP's: 1 error, 2 warning, 3 information, 4 hint
  code: string;       // EMODEL, EUNSUPPORTED, ...
  message: string;    // the daemon's message, with the place and the hint
  node?: string;      // the ONNX node named
  op?: string;        // its operator
  location: string;
  hint: string;
}

const NODE = /node '((?:[^']|'(?! \())*)'(?: \(([^)]*)\))?/;

export function modelProblem(d: Diagnostic): ModelProblem {
  const m = NODE.exec(d.location ?? '') ?? NODE.exec(d.message ?? '');
  const p: ModelProblem = { severity: d.severity || 1, code: d.code ?? '', message: d.message, location: d.location ?? '', hint: d.hint ?? '' };
  if (m) {
    p.node = m[1];
    if (m[2]) p.op = m[2];
  }
  const parts = [d.message];
  if (p.location && !d.message.includes(p.location)) parts.push(`at ${p.location}`);
  if (p.hint) parts.push(`hint: ${p.hint}`);
  p.message = parts.join(' — ');
  return p;
}

/** The problems of a failed compile (its error's diagnostics, or the error itself). */
export function problemsOfError(e: RpcError): ModelProblem[] {
  return e.diagnostics.map(modelProblem);
}

/** The problems of a compile that succeeded: its warnings (notes of --explain are left out:
 *  they are in the report). */
export function problemsOfResult(diagnostics: Diagnostic[]): ModelProblem[] {
  return diagnostics.filter((d) => d.severity === 1 || d.severity === 2).map(modelProblem);
}
