// What the model page shows of an ONNX file before any compile: its inputs and outputs (element
// type and shape), operator counts, opsets and producer. Read straight from the protobuf wire
// format (the ModelProto field numbers are listed in docs/editor.md); tensor data is skipped,
// never copied.

export interface ValueInfo {
  name: string;
  type: string;       // 'float32', 'int64', ... or '?' when the model does not say
  shape: (number | string)[] | null; // a symbolic dimension is its name ('batch'), an unknown one '?'
}

export interface ModelSummary {
  irVersion: number;
  producer: string;
  opsets: { domain: string; version: number }[];
  graphName: string;
  inputs: ValueInfo[];           // graph inputs that are not initializers
  outputs: ValueInfo[];
  initializers: number;
  parameterBytes: number;        // bytes of the initializers' data held in the file
  nodes: number;                 // nodes of the main graph
  operators: { op: string; domain: string; count: number }[]; // most used first
  nodeOps: Map<string, string>;  // node name -> its operator (for placing a refusal)
}

export class OnnxError extends Error {}

// element types of TensorProto.DataType, by number
const ELEM: Record<number, string> = {
  1: 'float32', 2: 'uint8', 3: 'int8', 4: 'uint16', 5: 'int16', 6: 'int32', 7: 'int64', 8: 'string',
  9: 'bool', 10: 'float16', 11: 'float64', 12: 'uint32', 13: 'uint64', 14: 'complex64', 15: 'complex128',
  16: 'bfloat16', 17: 'float8e4m3fn', 18: 'float8e4m3fnuz', 19: 'float8e5m2', 20: 'float8e5m2fnuz',
  21: 'uint4', 22: 'int4',
};

type Field = { no: number; wire: number; value: number; start: number; end: number };

/** The fields of one message in buf[start, end): varints as numbers, length-delimited as ranges. */
function* fields(buf: Uint8Array, start: number, end: number): Generator<Field> {
  let p = start;
  const varint = (): number => {
    let v = 0;
    let mul = 1;
    for (let k = 0; k < 10; k++) {
      if (p >= end) throw new OnnxError('the file ends inside a number: not an ONNX model, or a truncated one');
      const b = buf[p++];
      v += (b & 0x7f) * mul;
      mul *= 128;
      if (!(b & 0x80)) return v;
    }
    throw new OnnxError('a number longer than 10 bytes: not an ONNX model');
  };
  while (p < end) {
    const key = varint();
    const no = Math.floor(key / 8);
    const wire = key & 7;
    if (no === 0) throw new OnnxError('field number 0: not an ONNX model');
    if (wire === 0) yield { no, wire, value: varint(), start: p, end: p };
    else if (wire === 1) { p += 8; yield { no, wire, value: 0, start: p - 8, end: p }; }
    else if (wire === 5) { p += 4; yield { no, wire, value: 0, start: p - 4, end: p }; }
    else if (wire === 2) {
      const len = varint();
      if (p + len > end) throw new OnnxError('a field runs past the end of its message: a truncated or damaged model');
      yield { no, wire, value: len, start: p, end: p + len };
      p += len;
    } else throw new OnnxError(`wire type ${wire}: not an ONNX model`);
    if (p > end) throw new OnnxError('the file ends inside a field: a truncated model');
  }
}

const text = (buf: Uint8Array, f: Field): string => Buffer.from(buf.buffer, buf.byteOffset + f.start, f.end - f.start).toString('utf8');

function valueInfo(buf: Uint8Array, s: number, e: number): ValueInfo {
  const v: ValueInfo = { name: '', type: '?', shape: null };
  for (const f of fields(buf, s, e)) {
    if (f.no === 1 && f.wire === 2) v.name = text(buf, f);
    if (f.no !== 2 || f.wire !== 2) continue;
    for (const t of fields(buf, f.start, f.end)) { // TypeProto
      if (t.no !== 1 || t.wire !== 2) continue;     // tensor_type
      for (const tt of fields(buf, t.start, t.end)) {
        if (tt.no === 1 && tt.wire === 0) v.type = ELEM[tt.value] ?? `type ${tt.value}`;
        if (tt.no === 2 && tt.wire === 2) {
          v.shape = [];
          for (const d of fields(buf, tt.start, tt.end)) {
            if (d.no !== 1 || d.wire !== 2) continue;
            let dim: number | string = '?';
            for (const x of fields(buf, d.start, d.end)) {
              if (x.no === 1 && x.wire === 0) dim = x.value;
              if (x.no === 2 && x.wire === 2) dim = text(buf, x);
            }
            v.shape.push(dim);
          }
        }
      }
    }
  }
  return v;
}

/** The summary of an ONNX model's bytes; OnnxError when they are not one. */
export function summarize(buf: Uint8Array): ModelSummary {
  const m: ModelSummary = {
    irVersion: 0, producer: '', opsets: [], graphName: '', inputs: [], outputs: [], initializers: 0,
    parameterBytes: 0, nodes: 0, operators: [], nodeOps: new Map(),
  };
  let producerVersion = '';
  let graph: Field | null = null;
  for (const f of fields(buf, 0, buf.length)) {
    if (f.no === 1 && f.wire === 0) m.irVersion = f.value;
    else if (f.no === 2 && f.wire === 2) m.producer = text(buf, f);
    else if (f.no === 3 && f.wire === 2) producerVersion = text(buf, f);
    else if (f.no === 7 && f.wire === 2) graph = f;
    else if (f.no === 8 && f.wire === 2) {
      const o = { domain: '', version: 0 };
      for (const x of fields(buf, f.start, f.end)) {
        if (x.no === 1 && x.wire === 2) o.domain = text(buf, x);
        if (x.no === 2 && x.wire === 0) o.version = x.value;
      }
      m.opsets.push(o);
    }
  }
  if (producerVersion) m.producer = `${m.producer} ${producerVersion}`.trim();
  if (!graph) throw new OnnxError('no graph: not an ONNX model');
  const inits = new Set<string>();
  const counts = new Map<string, { op: string; domain: string; count: number }>();
  const inputs: ValueInfo[] = [];
  for (const f of fields(buf, graph.start, graph.end)) {
    if (f.wire !== 2) continue;
    if (f.no === 2) m.graphName = text(buf, f);
    else if (f.no === 11) inputs.push(valueInfo(buf, f.start, f.end));
    else if (f.no === 12) m.outputs.push(valueInfo(buf, f.start, f.end));
    else if (f.no === 5) {
      m.initializers++;
      for (const x of fields(buf, f.start, f.end)) {
        if (x.no === 8 && x.wire === 2) inits.add(text(buf, x));
        // the data fields (float_data ... uint64_data, raw_data), packed; data kept in
        // external files is not in these bytes
        if (x.wire === 2 && [4, 5, 6, 7, 9, 10, 11].includes(x.no)) m.parameterBytes += x.end - x.start;
      }
    } else if (f.no === 1) {
      m.nodes++;
      let op = '', domain = '', name = '';
      for (const x of fields(buf, f.start, f.end)) {
        if (x.wire !== 2) continue;
        if (x.no === 4) op = text(buf, x);
        else if (x.no === 7) domain = text(buf, x);
        else if (x.no === 3) name = text(buf, x);
      }
      const k = `${domain}\u0000${op}`;
      const c = counts.get(k) ?? { op, domain, count: 0 };
      c.count++;
      counts.set(k, c);
      if (name) m.nodeOps.set(name, op);
    }
  }
  m.inputs = inputs.filter((v) => !inits.has(v.name));
  m.operators = [...counts.values()].sort((a, b) => b.count - a.count || a.op.localeCompare(b.op));
  return m;
}

/** "float32 [1, 1, 8, 8]" */
export function describeValue(v: ValueInfo): string {
  return v.shape ? `${v.type} [${v.shape.join(', ')}]` : v.type;
}
