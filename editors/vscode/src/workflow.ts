// "Compile for target..." below the editor: where the artifact goes, the compile through the
// daemon, the artifact written whole or not at all, and what the model page and the Problems
// panel show of it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { modelName, Progress, RpcError, TthClient } from './client';
import { problemsOfError, problemsOfResult } from './diagnostics';
import { CompileView } from './report';
import { readTar } from './tar';

/** Where the artifact of modelPath goes: beside it, or in outputFolder (relative to the
 *  workspace folder when not absolute); named as tthctl names it, NAME.tar. */
export function artifactPath(modelPath: string, outputFolder: string, workspaceFolder?: string): string {
  const file = `${modelName(modelPath)}.tar`;
  if (!outputFolder) return path.join(path.dirname(modelPath), file);
  const dir = path.isAbsolute(outputFolder) ? outputFolder : path.join(workspaceFolder ?? path.dirname(modelPath), outputFolder);
  return path.join(dir, file);
}

/** Write bytes to out through a temporary file beside it and a rename: out is the whole new
 *  artifact or untouched. */
export function writeWhole(out: string, bytes: Buffer): void {
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const tmp = path.join(path.dirname(out), `.${path.basename(out)}.tmp-${process.pid}`);
  try {
    fs.writeFileSync(tmp, bytes);
    fs.renameSync(tmp, out);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
}

/** What the page shows of an artifact's bytes: its files, its report, its target and workspace. */
export function artifactFacts(bytes: Buffer): Pick<CompileView, 'files' | 'reportHtml' | 'workspaceBytes' | 'canonical'> {
  const entries = readTar(bytes);
  const report = entries.find((e) => e.name === 'explain/report.html');
  const meta = entries.find((e) => e.name === 'metadata.json');
  let workspaceBytes: number | undefined;
  let canonical: string | undefined;
  if (meta) {
    try {
      const m = JSON.parse(meta.data.toString('utf8'));
      if (typeof m?.memory?.workspace_bytes === 'number') workspaceBytes = m.memory.workspace_bytes;
      if (typeof m?.target_string === 'string') canonical = m.target_string;
    } catch {
      // an artifact whose metadata is not JSON: shown without those facts
    }
  }
  return {
    files: entries.map((e) => ({ name: e.name, size: e.size })),
    reportHtml: report?.data.toString('utf8'),
    workspaceBytes,
    canonical,
  };
}

export interface CompileJob {
  modelPath: string;
  target: string;
  out: string;
  explain: boolean;
  signal?: AbortSignal;
  onProgress?: (p: Progress) => void;
}

/** Compile and write the artifact; the view of the outcome (a refusal is a view too, with its
 *  problems). Throws only when the daemon could not be asked (connection lost) or the request
 *  was cancelled (RpcError -32800). */
export async function compileToFile(client: TthClient, job: CompileJob): Promise<CompileView> {
  const t0 = Date.now();
  try {
    const options: Record<string, unknown> = {};
    if (job.explain) options.explain = true;
    const { result, artifact } = await client.compile({ modelPath: job.modelPath, target: job.target, options },
      { signal: job.signal, onProgress: job.onProgress });
    writeWhole(job.out, artifact);
    return {
      state: 'ok',
      target: job.target,
      cache: result.cache,
      key: result.key,
      artifactPath: job.out,
      artifactBytes: artifact.length,
      seconds: result.timings?.total ?? (Date.now() - t0) / 1000,
      problems: problemsOfResult(result.diagnostics ?? []),
      ...artifactFacts(artifact),
    };
  } catch (e) {
    if (!(e instanceof RpcError) || e.code === 0 || e.code === -32800) throw e;
    return { state: 'failed', target: job.target, problems: problemsOfError(e) };
  }
}

/** The view of an artifact already on disk (compiled before this editor session), or undefined
 *  when there is none or it is older than the model. */
export function previousArtifact(modelPath: string, out: string): CompileView | undefined {
  try {
    const a = fs.statSync(out);
    if (a.mtimeMs < fs.statSync(modelPath).mtimeMs) return undefined;
    const bytes = fs.readFileSync(out);
    const facts = artifactFacts(bytes);
    return { state: 'ok', target: facts.canonical ?? '(unknown)', artifactPath: out, artifactBytes: bytes.length, problems: [], ...facts };
  } catch {
    return undefined;
  }
}
