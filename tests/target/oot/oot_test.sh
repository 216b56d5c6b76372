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
if [ "$exported" != "tth_descriptor tth_target_parser " ]; then
    echo "FAIL: exported symbols are: $exported"
    exit 1
fi

"$loader" "$tmp/plugins" "$plugins"
