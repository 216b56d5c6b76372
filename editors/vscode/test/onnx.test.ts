// The model summary against the onnx Python package's reading of the same files: the digits
// example, a model with symbolic and unknown dimensions, opsets of two domains and initializers
// that are also listed as inputs; damaged files are refused with a reason.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { describeValue, OnnxError, summarize } from '../src/onnx';
import { DIGITS, python, tempDir } from './support';

// what onnx itself says of a model file
const ONNX_VIEW = `
import json, sys, collections, onnx, onnx.mapping
m = onnx.load(sys.argv[1])
g = m.graph
inits = {t.name for t in g.initializer}
def vi(v):
    t = v.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param if d.HasField("dim_param") else "?") for d in t.shape.dim] if t.HasField("shape") else None
    return [v.name, onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[t.elem_type].name if t.elem_type else "?", dims]
ops = collections.Counter((n.domain, n.op_type) for n in g.node)
print(json.dumps({"inputs": [vi(v) for v in g.input if v.name not in inits], "outputs": [vi(v) for v in g.output],
  "ops": sorted([[o, d, c] for (d, o), c in ops.items()]), "nodes": len(g.node), "initializers": len(g.initializer),
  "opsets": sorted([[o.domain, o.version] for o in m.opset_import]), "ir": m.ir_version, "graph": g.name}))
`;

function compare(file: string): void {
  const ref = JSON.parse(python(ONNX_VIEW, file));
  const s = summarize(fs.readFileSync(file));
  assert.deepEqual(s.inputs.map((v) => [v.name, v.type, v.shape]), ref.inputs);
  assert.deepEqual(s.outputs.map((v) => [v.name, v.type, v.shape]), ref.outputs);
  assert.deepEqual(s.operators.map((o) => [o.op, o.domain, o.count]).sort(), ref.ops);
  assert.equal(s.nodes, ref.nodes);
  assert.equal(s.initializers, ref.initializers);
  assert.deepEqual(s.opsets.map((o) => [o.domain, o.version]).sort(), ref.opsets);
  assert.equal(s.irVersion, ref.ir);
  assert.equal(s.graphName, ref.graph);
}

test('the digits example reads as onnx reads it', () => {
  compare(DIGITS);
  const s = summarize(fs.readFileSync(DIGITS));
  assert.equal(describeValue(s.inputs[0]), 'float32 [1, 1, 8, 8]');
  assert.ok(s.parameterBytes > 1000, 'the weights are counted');
  assert.ok(s.operators[0].count >= s.operators[s.operators.length - 1].count, 'most used first');
});

test('symbolic and unknown dimensions, two domains, initializers listed as inputs', () => {
  const dir = tempDir('onnx');
  const file = path.join(dir, 'm.onnx');
  python(`
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", 4])
xi = helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 4])
y = helper.make_tensor_value_info("y", TensorProto.INT64, None)
z = helper.make_tensor_value_info("z", TensorProto.BOOL, [None, 3])
nodes = [helper.make_node("Cast", ["x"], ["xf"], to=1, name="cast"), helper.make_node("MatMul", ["xf", "w"], ["m"], name="mm"),
         helper.make_node("MatMul", ["m", "w"], ["m2"], name="mm2"), helper.make_node("ArgMax", ["m2"], ["y"], name="am"),
         helper.make_node("Custom", ["m2"], ["z"], domain="com.example", name="custom")]
g = helper.make_graph(nodes, "two-domains", [x, xi], [y, z], [w])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)], producer_name="test", producer_version="9"), sys.argv[1])
`, file);
  compare(file);
  const s = summarize(fs.readFileSync(file));
  assert.deepEqual(s.inputs.map((v) => v.name), ['x'], 'w is an initializer, not an input');
  assert.equal(describeValue(s.outputs[1]), 'bool [?, 3]');
  assert.equal(s.producer, 'test 9');
  assert.equal(s.nodeOps.get('custom'), 'Custom');
  fs.rmSync(dir, { recursive: true });
});

test('files that are not ONNX models are refused with a reason', () => {
  const good = fs.readFileSync(DIGITS);
  for (const cut of [1, 10, good.length >> 1, good.length - 1]) {
    assert.throws(() => summarize(good.subarray(0, cut)), OnnxError, `cut at ${cut}`);
  }
  assert.throws(() => summarize(Buffer.from('hello, this is text\n')), OnnxError);
  assert.throws(() => summarize(Buffer.alloc(0)), /no graph/);
});

test('damaged bytes anywhere in a model are refused as OnnxError, never another error', () => {
  const good = fs.readFileSync(DIGITS);
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
  for (let i = 0; i < 5000; i++) {
    const b = Buffer.from(good);
    for (let k = 1 + Math.floor(rnd() * 8); k > 0; k--) b[Math.floor(rnd() * b.length)] = Math.floor(rnd() * 256);
    try {
      summarize(b);
    } catch (e) {
      assert.ok(e instanceof OnnxError, `${(e as Error).constructor.name}: ${(e as Error).message}`);
    }
  }
});
