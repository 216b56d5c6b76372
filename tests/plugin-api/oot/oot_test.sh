#!/bin/sh
# Out-of-tree plugin test: install tth into a temporary directory, build oot_plugin.c against the
# installed headers and library with `pkg-config tth-plugin` only, and load it with the registry.
# usage: oot_test.sh BUILD_DIR SOURCE_DIR OOT_LOAD PLUGINS_DIR
set -eu
build=$1
src=$2
loader=$3
plugins=$4
tmp=$(mktemp -d /tmp/tth-oot-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

meson install -C "$build" --no-rebuild --destdir "$tmp/dest" >"$tmp/install.log" 2>&1 || {
    cat "$tmp/install.log"
    echo "FAIL: meson install"
    exit 1
}
pc=$(find "$tmp/dest" -name tth-plugin.pc | head -n 1)
if [ -z "$pc" ]; then
    echo "FAIL: no tth-plugin.pc was installed"
    exit 1
fi
# The .pc file's paths are relative to its own directory (${pcfiledir}), so pkg-config finds the
# staged tree with no sysroot setting, as it would a moved prefix.
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
unset PKG_CONFIG_SYSROOT_DIR
cflags=$(pkg-config --cflags tth-plugin)
libs=$(pkg-config --libs tth-plugin)
echo "pkg-config tth-plugin: $cflags $libs"
case "$cflags" in
*"$tmp/dest"*) ;;
*) echo "FAIL: cflags do not point into the installed tree"; exit 1 ;;
esac
plugindir=$(pkg-config --variable=plugindir tth-plugin)
abi=$(pkg-config --variable=abi_major tth-plugin)
echo "plugindir=$plugindir abi_major=$abi"
case "$plugindir" in
"$tmp/dest"*/tth/plugins) ;;
*) echo "FAIL: plugindir does not point into the installed tree"; exit 1 ;;
esac
[ "$abi" = 1 ] || { echo "FAIL: abi_major is '$abi'"; exit 1; }

mkdir -m 0755 "$tmp/plugins"
# shellcheck disable=SC2086
${CC:-cc} -std=c11 -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden \
    -o "$tmp/plugins/oot-npu.so" "$src/oot_plugin.c" $cflags $libs
chmod 0755 "$tmp/plugins/oot-npu.so"

# Only the descriptor and the hook are exported (besides the linker's own _end, _edata, ...).
exported=$(nm -D --defined-only "$tmp/plugins/oot-npu.so" | awk '$2 ~ /^[TDRB]$/ && $3 !~ /^_/ {print $3}' |
    sort | tr '\n' ' ')
if [ "$exported" != "tth_descriptor tth_partition_supports tth_relay_to_runtime tth_target_parser " ]; then
    echo "FAIL: exported symbols are: $exported"
    exit 1
fi

"$loader" "$tmp/plugins" "$plugins"

# The plugin in a compile: the staged tthd, its plugins and ours on the plugins path, an ONNX
# model whose add the plugin takes (x + y, 3x4x5), compiled for "oot-npu,c", run by tthctl and
# compared with the ONNX test data's expected output.
node=/usr/share/libonnx-testdata/data/node/test_add
if [ ! -d "$node" ] || ! /usr/bin/python3 -c 'import numpy, onnx' 2>/dev/null; then
    echo "skipped the compile: libonnx-testdata or python3-numpy/python3-onnx is missing"
    exit 0
fi
bin=$(dirname "$(find "$tmp/dest" -name tthctl -type f | head -n 1)")
lib=$(dirname "$(find "$tmp/dest" -name 'libtth.so*' | head -n 1)")
staged_plugins=$(find "$tmp/dest" -type d -path '*/tth/plugins' | head -n 1)
mkdir -m 0700 "$tmp/run"
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TTH_PLUGINS_PATH="$staged_plugins:$tmp/plugins" XDG_RUNTIME_DIR="$tmp/run" XDG_CACHE_HOME="$tmp/cache"
trap '"$bin/tthctl" --no-start stop >/dev/null 2>&1; rm -rf "$tmp"' EXIT INT TERM
"$bin/tthctl" -q compile "$node/model.onnx" --target 'oot-npu,c -lanes=16' -o "$tmp/add.tar" --json \
    > "$tmp/add.json" 2> "$tmp/add.err" || {
    echo "FAIL: compile for oot-npu,c"; cat "$tmp/add.err"; tail -20 "$tmp/run/tth/tthd.log" 2>/dev/null; exit 1; }
grep -q '"kind": *"oot-npu"' "$tmp/add.json" || grep -q '"kind":"oot-npu"' "$tmp/add.json" || {
    echo "FAIL: the add did not go to oot-npu"; exit 1; }
tar -tf "$tmp/add.tar" | grep -q '^codegen/oot-npu/src/.*\.c$' || { echo "FAIL: no oot-npu source in the artifact"; exit 1; }
"$bin/tthctl" run "$tmp/add.tar" --input "x=$node/test_data_set_0/input_0.pb" \
    --input "y=$node/test_data_set_0/input_1.pb" --output-dir "$tmp/out" > /dev/null || { echo "FAIL: tthctl run"; exit 1; }
/usr/bin/python3 - "$tmp/out/sum.npy" "$node/test_data_set_0/output_0.pb" <<'PY' || exit 1
import sys, numpy as np, onnx
from onnx import numpy_helper
got = np.load(sys.argv[1])
t = onnx.TensorProto()
t.ParseFromString(open(sys.argv[2], "rb").read())
want = numpy_helper.to_array(t)
if got.shape != want.shape or not np.allclose(got, want, rtol=1e-6, atol=1e-6):
    print("FAIL: oot-npu's add gives other numbers than the ONNX test data")
    sys.exit(1)
print("ok: a model compiled for oot-npu,c runs and matches the ONNX test data")
PY
