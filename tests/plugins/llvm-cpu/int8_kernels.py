#!/usr/bin/python3
"""The int8 kernels (docs/int8.md) as machine code, against numpy's integer reference, bit for bit.

    tests/plugins/llvm-cpu/int8_kernels.py --tthctl build/client/tthctl

Each case is a QLinearConv model (integer input and output); numpy computes the integer
convolution exactly and requantizes as the ONNX importer's graph says (float32: acc times
(x_scale * w_scale) / y_scale, rounded half to even, plus the zero point, saturated). Each is
compiled through a private tthd for
  - this machine: plain llvm (VNNI where the CPU has it), -mcpu=haswell (AVX2, no VNNI: the dot
    products as widening multiplies), -mcpu=skylake-avx512 (AVX-512 without VNNI),
    -mcpu=alderlake (AVX-VNNI on 256-bit registers, when this CPU has it), and the c kind;
    each run with tthctl run;
  - AArch64 under qemu-aarch64 -cpu max: cortex-a72 (no dot product), cortex-a76 (sdot),
    +v8.6a (i8mm: usdot), cross-built from the artifact as its README says;
and the number of dot-product instructions in the artifact's object is printed and checked:
some where the target has the instruction, none where it has not.
Exit status 77 (skipped) when numpy or onnx is missing; the AArch64 part is skipped without
aarch64-linux-gnu-gcc or qemu-aarch64.
"""
import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support"))
from private_tthd import run, run_with_daemon, tthctl_args  # noqa: E402
from artifact_main import AARCH64_CC, build, compare, compile_unpacked, run_program  # noqa: E402

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:
    np = None

F32 = np.float32 if np is not None else None


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


FLAGS = cpu_flags()
# (label, target, how to run, dot-product instruction pattern, instructions expected)
HOST_TARGETS = [
    ("llvm", "llvm", r"\bvpdpbusd\b", "avx512_vnni" in FLAGS or "avx_vnni" in FLAGS),
    ("haswell", "llvm -mcpu=haswell", r"\bvpdpbusd\b", False),
    ("skylake-avx512", "llvm -mcpu=skylake-avx512", r"\bvpdpbusd\b", False),
    ("c", "c", None, False),
]
if "avx_vnni" in FLAGS and "avx2" in FLAGS:
    HOST_TARGETS.insert(3, ("alderlake", "llvm -mcpu=alderlake", r"\bvpdpbusd\b", True))
# float32 lanes of each target's vectors: the layout pass's blocks (docs/layouts.md)
LANES = {"llvm": 16 if "avx512f" in FLAGS else 8 if "avx2" in FLAGS else 4, "haswell": 8, "skylake-avx512": 16,
         "alderlake": 8, "c": 1, "cortex-a72": 4, "cortex-a76": 4, "v8.6a-i8mm": 4}


def block_for(c, lanes):
    """the layout pass's block for c channels (daemon/frontend/layout.c), 0: NCHW"""
    b = lanes
    while lanes >= 4 and b >= 4 and 2 * b >= lanes:
        if c % b == 0:
            return b
        b //= 2
    return 0


AARCH64_TARGETS = [
    ("cortex-a72", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", r"\b(u|s|us)dot\b", False),
    ("cortex-a76", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a76", r"\bsdot\b", True),
    ("v8.6a-i8mm", "llvm -mtriple=aarch64-linux-gnu -mattr=+v8.6a", r"\busdot\b", True),
]


def conv_ref(x, xzp, w, b, strides, pads, dil, groups=1):
    """the exact integer convolution (int64), NCHW / OIHW, pads (top, left, bottom, right)"""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // groups
    t, l, bo, r = pads
    xp = np.zeros((n, c, h + t + bo, wd + l + r), dtype=np.int64)
    xp[:, :, t:t + h, l:l + wd] = x.astype(np.int64) - int(xzp)
    oh = (h + t + bo - (kh - 1) * dil[0] - 1) // strides[0] + 1
    ow = (wd + l + r - (kw - 1) * dil[1] - 1) // strides[1] + 1
    y = np.zeros((n, o, oh, ow), dtype=np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dil[0]: i * dil[0] + strides[0] * (oh - 1) + 1: strides[0],
                       j * dil[1]: j * dil[1] + strides[1] * (ow - 1) + 1: strides[1]]
            for g in range(groups):
                y[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch[:, g * cg:(g + 1) * cg],
                                                       w[g * og:(g + 1) * og, :, i, j].astype(np.int64))
    if b is not None:
        y += b.astype(np.int64).reshape(1, -1, 1, 1)
    return y


def requantize(acc, xs, ws, ys, yzp, dtype):
    """float32 as the importer's graph computes it (docs/int8.md)"""
    m = (F32(xs) * ws.astype(F32)).astype(F32) / F32(ys)
    v = np.rint(acc.astype(np.int32).astype(F32) * m.reshape(1, -1, 1, 1)) + F32(yzp)
    info = np.iinfo(dtype)
    return np.clip(v, info.min, info.max).astype(dtype)


def qlinear_conv_case(name, seed, xshape, xdt, xzp, o, k, strides, pads, dil, ydt, yzp, groups=1):
    rng = np.random.default_rng(seed)
    info = np.iinfo(xdt)
    x = rng.integers(info.min, info.max, size=xshape, endpoint=True).astype(xdt)
    w = rng.integers(-128, 127, size=(o, xshape[1] // groups, k, k), endpoint=True).astype(np.int8)
    b = rng.integers(-20000, 20000, size=(o,), endpoint=True).astype(np.int32)
    xs, ys = F32(0.02), F32(0.9)
    ws = np.linspace(0.001, 0.004, o).astype(F32)
    acc = conv_ref(x, xzp, w, b, strides, pads, dil, groups)
    y = requantize(acc, xs, ws, ys, yzp, ydt)
    tp = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8}
    inits = [numpy_helper.from_array(np.array(xs, F32), "xs"), numpy_helper.from_array(np.array(xzp, xdt), "xz"),
             numpy_helper.from_array(w, "w"), numpy_helper.from_array(ws, "ws"),
             numpy_helper.from_array(np.zeros(o, np.int8), "wz"), numpy_helper.from_array(np.array(ys, F32), "ys"),
             numpy_helper.from_array(np.array(yzp, ydt), "yz"), numpy_helper.from_array(b, "b")]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                            strides=list(strides), pads=[pads[0], pads[1], pads[2], pads[3]], dilations=list(dil),
                            group=groups)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", tp[xdt], list(x.shape))],
                          [helper.make_tensor_value_info("y", tp[ydt], list(y.shape))], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    return m, x, y


def qlinear_chain_case(name, seed, xshape, xzp, layers):
    """QLinearConv layers one after another (uint8 throughout), each (o, k, strides, pads, groups,
    yzp) reading the one before with its scale and zero point: the layers between stay in
    blocked channels (docs/int8.md, "Blocked channels")"""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 255, size=xshape, endpoint=True).astype(np.uint8)
    cur, cur_s, cur_z, c = x, F32(0.02), xzp, xshape[1]
    inits, nodes = [numpy_helper.from_array(np.array(cur_s, F32), "s0"), numpy_helper.from_array(np.array(xzp, np.uint8), "z0")], []
    for i, (o, k, st, pads, groups, yzp) in enumerate(layers):
        w = rng.integers(-128, 127, size=(o, c // groups, k, k), endpoint=True).astype(np.int8)
        b = rng.integers(-20000, 20000, size=(o,), endpoint=True).astype(np.int32)
        ws = np.linspace(0.001, 0.004, o).astype(F32)
        ys = F32(0.9 if groups == 1 else 0.3)
        cur = requantize(conv_ref(cur, cur_z, w, b, st, pads, (1, 1), groups), cur_s, ws, ys, yzp, np.uint8)
        n = str(i + 1)
        inits += [numpy_helper.from_array(w, "w" + n), numpy_helper.from_array(ws, "ws" + n),
                  numpy_helper.from_array(np.zeros(o, np.int8), "wz" + n), numpy_helper.from_array(b, "b" + n),
                  numpy_helper.from_array(np.array(ys, F32), "s" + n), numpy_helper.from_array(np.array(yzp, np.uint8), "z" + n)]
        nodes.append(helper.make_node("QLinearConv", ["x" if i == 0 else "y" + str(i), "s" + str(i), "z" + str(i),
                                                      "w" + n, "ws" + n, "wz" + n, "s" + n, "z" + n, "b" + n],
                                      ["y" + n if i + 1 < len(layers) else "y"], strides=list(st), pads=list(pads),
                                      group=groups))
        cur_s, cur_z, c = ys, yzp, o
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.UINT8, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, list(cur.shape))], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), x, cur


def qlinear_matmul_case(name, seed, ashape, adt, azp, n, ydt, yzp):
    rng = np.random.default_rng(seed)
    info = np.iinfo(adt)
    a = rng.integers(info.min, info.max, size=ashape, endpoint=True).astype(adt)
    k = ashape[-1]
    b = rng.integers(-128, 127, size=(k, n), endpoint=True).astype(np.int8)
    xs, ys = F32(0.03), F32(0.6)
    bs = np.linspace(0.0005, 0.002, n).astype(F32)
    acc = (a.astype(np.int64) - int(azp)) @ b.astype(np.int64)
    m = (xs * bs).astype(F32) / ys
    v = np.rint(acc.astype(np.int32).astype(F32) * m) + F32(yzp)
    yi = np.iinfo(ydt)
    y = np.clip(v, yi.min, yi.max).astype(ydt)
    tp = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8}
    inits = [numpy_helper.from_array(np.array(xs, F32), "as"), numpy_helper.from_array(np.array(azp, adt), "az"),
             numpy_helper.from_array(b, "b"), numpy_helper.from_array(bs, "bs"),
             numpy_helper.from_array(np.zeros(n, np.int8), "bz"), numpy_helper.from_array(np.array(ys, F32), "ys"),
             numpy_helper.from_array(np.array(yzp, ydt), "yz")]
    node = helper.make_node("QLinearMatMul", ["x", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", tp[adt], list(a.shape))],
                          [helper.make_tensor_value_info("y", tp[ydt], list(y.shape))], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), a, y


def cases():
    # channels not a multiple of 4, output channels not a multiple of the tile, rows of several
    # vectors with a tail, strides, dilation, both input types, saturation at both ends
    return [
        ("conv3x3_int8", qlinear_conv_case("conv3x3_int8", 1, (1, 13, 20, 37), np.int8, -5, 24, 3, (1, 1), (1, 1, 1, 1),
                                           (1, 1), np.int8, 3)),
        ("conv3x3_s2_uint8", qlinear_conv_case("conv3x3_s2_uint8", 2, (1, 8, 15, 15), np.uint8, 128, 16, 3, (2, 2),
                                               (1, 1, 1, 1), (1, 1), np.uint8, 120)),
        ("conv1x1_uint8", qlinear_conv_case("conv1x1_uint8", 3, (1, 20, 7, 9), np.uint8, 7, 33, 1, (1, 1), (0, 0, 0, 0),
                                            (1, 1), np.int8, -2)),
        ("conv3x3_dilated_int8", qlinear_conv_case("conv3x3_dilated_int8", 4, (1, 6, 19, 30), np.int8, 100, 9, 3, (1, 1),
                                                   (2, 2, 2, 2), (2, 2), np.uint8, 0)),
        # a 1x1 layer of at least four vectors of pixels: the image as one row, pixels on the lanes
        ("conv1x1_flat_int8", qlinear_conv_case("conv1x1_flat_int8", 10, (1, 20, 10, 13), np.int8, -20, 40, 1, (1, 1),
                                                (0, 0, 0, 0), (1, 1), np.int8, 7)),
        # groups of 8 input and 16 output channels (ResNeXt's shape), on the channel-blocked kernel
        ("conv3x3_grouped_int8", qlinear_conv_case("conv3x3_grouped_int8", 12, (1, 32, 14, 14), np.int8, 4, 64, 3, (1, 1),
                                                   (1, 1, 1, 1), (1, 1), np.int8, 0, groups=4)),
        # fewer output channels than lanes on wide rows: pixels on the lanes (int8-dot-rows)
        ("conv3x3_few_outputs", qlinear_conv_case("conv3x3_few_outputs", 9, (1, 16, 12, 50), np.uint8, 3, 3, 3, (1, 1),
                                                  (1, 1, 1, 1), (1, 1), np.uint8, 100)),
        # depthwise (docs/int8.md): the float kernel's vectors along rows, in dot products where
        # the target has them (a 5x5 row in two words), else int32 multiply-adds
        ("depthwise3x3_int8", qlinear_conv_case("depthwise3x3_int8", 5, (1, 24, 18, 40), np.int8, -9, 24, 3, (1, 1),
                                                (1, 1, 1, 1), (1, 1), np.int8, 2, groups=24)),
        ("depthwise3x3_s2_uint8", qlinear_conv_case("depthwise3x3_s2_uint8", 6, (1, 10, 23, 41), np.uint8, 131, 10, 3,
                                                    (2, 2), (1, 1, 1, 1), (1, 1), np.uint8, 128, groups=10)),
        # 7x7 rows, stride 1: the flat form (docs/lowering.md, "Depthwise kernel"), MobileNet's last blocks
        ("depthwise3x3_7x7_uint8", qlinear_conv_case("depthwise3x3_7x7_uint8", 13, (1, 40, 7, 7), np.uint8, 200, 40, 3,
                                                     (1, 1), (1, 1, 1, 1), (1, 1), np.uint8, 3, groups=40)),
        ("depthwise5x5_int8", qlinear_conv_case("depthwise5x5_int8", 11, (1, 12, 15, 33), np.int8, 5, 12, 5, (1, 1),
                                                (2, 2, 2, 2), (1, 1), np.int8, -3, groups=12)),
        # rows of 300, stride 2, two words a row: the windows shrink to one output row so that
        # each of their buffers stays within the code generator's stack bound
        ("depthwise5x5_s2_wide", qlinear_conv_case("depthwise5x5_s2_wide", 17, (1, 4, 12, 300), np.uint8, 7, 4, 5,
                                                   (2, 2), (2, 2, 2, 2), (1, 1), np.uint8, 90, groups=4)),
        # a MobileNet-v2 block and more in blocked channels: 1x1 expand, 3x3 depthwise, a strided
        # 3x3, a 1x1 project to 24 channels (blocks of 8 at 16 lanes)
        ("chain_blocked_uint8", qlinear_chain_case("chain_blocked_uint8", 19, (1, 16, 14, 15), 128, [
            (32, 1, (1, 1), (0, 0, 0, 0), 1, 0), (32, 3, (1, 1), (1, 1, 1, 1), 32, 5),
            (48, 3, (2, 2), (1, 1, 1, 1), 1, 120), (24, 1, (1, 1), (0, 0, 0, 0), 1, 7)])),
        # matmul: batch dimensions, K not a multiple of 4, N not a multiple of the vector; one
        # row with K split in four streams
        ("matmul_uint8", qlinear_matmul_case("matmul_uint8", 7, (2, 9, 50), np.uint8, 120, 70, np.int8, -1)),
        ("matmul_row_int8", qlinear_matmul_case("matmul_row_int8", 8, (1, 1030), np.int8, 0, 48, np.uint8, 128)),
    ]


def dot_count(objdump, d, meta, pattern):
    n = 0
    for obj in meta["files"]["objects"]:
        r = run([objdump, "-d", os.path.join(d, obj)])
        if r.returncode != 0:
            return None
        n += len(re.findall(pattern, r.stdout))
    return n


def one(daemon, work, name, model, x, want, label, target, pattern, expect_dot, aarch64):
    d = tempfile.mkdtemp(dir=work, prefix=name + "-" + label + "-")
    path = os.path.join(d, "model.onnx")
    onnx.save(model, path)
    tar = os.path.join(d, "model.tar")
    meta, why = compile_unpacked(daemon, path, target, tar)
    if why:
        return why, None
    ndot = None
    if pattern:
        ndot = dot_count("aarch64-linux-gnu-objdump" if aarch64 else "objdump", d, meta, pattern)
        if ndot is None:
            return "objdump failed", None
        if (ndot > 0) != expect_dot:
            return "%d dot-product instructions, expected %s" % (ndot, "some" if expect_dot else "none"), ndot
    if not aarch64:
        np.save(os.path.join(d, "x.npy"), x)
        out = os.path.join(d, "out")
        r = run([daemon.tthctl, "run", tar, "--input", "x=" + os.path.join(d, "x.npy"), "--output-dir", out])
        if r.returncode != 0:
            return "tthctl run: " + r.stderr.strip(), ndot
        return compare(np.load(os.path.join(out, "y.npy")), want, "tthctl run"), ndot
    exe, why = build(meta, d, cc=AARCH64_CC, bind_parameters=True)
    if why:
        return why, ndot
    why, y, _ = run_program(exe, meta, d, [x], ["qemu-aarch64", "-cpu", "max"], parameters=True)
    if why:
        return "under qemu: " + why, ndot
    return compare(y[0], want, "under qemu"), ndot


def main():
    args = tthctl_args("int8_kernels", modules=("numpy", "onnx"))
    cross = all(shutil.which(t) for t in ("aarch64-linux-gnu-gcc", "qemu-aarch64", "aarch64-linux-gnu-objdump"))
    if not cross:
        print("int8_kernels: the AArch64 part is skipped (aarch64-linux-gnu-gcc, -objdump or qemu-aarch64 missing)")
    targets = [(t, False) for t in HOST_TARGETS] + ([(t, True) for t in AARCH64_TARGETS] if cross else [])

    def body(daemon, work, failures):
        for name, (model, x, want) in cases():
            for (label, target, pattern, expect), a64 in targets:
                # a depthwise convolution in NCHW puts a kernel row's taps in words of four too
                # (docs/int8.md, "Depthwise in dot products"); in blocked channels (when the
                # layout pass gives its channels a block) it multiplies in int32
                dots = expect and not (name.startswith("depthwise") and block_for(x.shape[1], LANES[label]))
                why, ndot = one(daemon, work, name, model, x, want, label, target, pattern, dots, a64)
                shown = "" if ndot is None else " (%d dot-product instructions)" % ndot
                print("%-22s %-16s %s%s" % (name, label, "ok" if why is None else "FAILED: " + why, shown))
                failures.check(why is None, "%s/%s" % (name, label))

    return run_with_daemon(args.tthctl, "tth-int8-", body, "int8 kernels")


if __name__ == "__main__":
    sys.exit(main())
