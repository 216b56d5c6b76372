"""targets, tags, recent_targets, parse_target, plugins, status, cache_clear against the daemon's answers."""
import os

import tth
from conftest import EXAMPLES


def test_targets_and_tags(daemon):
    kinds = {k["kind"]: k for k in tth.targets()}
    assert "llvm" in kinds and "c" in kinds
    assert any(a["name"] == "mcpu" for a in kinds["llvm"]["attrs"])
    tags = {t["name"]: t for t in tth.tags()}
    assert "arm/cortex-m55" in tags
    assert tags["arm/cortex-m55"]["kind"] == "c"


def test_parse_target(daemon):
    r = tth.parse_target("llvm -mtriple=aarch64-linux-gnu")
    assert r["target"]["kind"] == "llvm"
    assert r["target"]["mtriple"] == "aarch64-linux-gnu"
    assert "-mtriple=aarch64-linux-gnu" in r["string"]
    assert [k["kind"] for k in r["kinds"]] == ["llvm"]
    assert tth.parse_target({"kind": "c"})["target"]["kind"] == "c"


def test_plugins_and_status(daemon):
    p = tth.plugins()
    assert any(x["kind"] == "llvm" for x in p["plugins"])
    st = tth.status()
    assert st["socket"] == os.path.join(daemon, "tthd.sock")
    assert st["cacheDir"].startswith(daemon)
    assert st["protocolVersion"].startswith("1.")


def test_cache_clear(daemon):
    tth.compile(os.path.join(EXAMPLES, "digits.onnx"), "llvm")
    assert tth.status()["cache"]["entries"] >= 1
    r = tth.cache_clear()
    assert r["removedEntries"] >= 1
    assert tth.status()["cache"]["entries"] == 0
    assert tth.compile(os.path.join(EXAMPLES, "digits.onnx"), "llvm").cache == "miss"


def test_recent_targets(daemon):
    tth.compile(os.path.join(EXAMPLES, "digits.onnx"), {"kind": "c"})
    tth.compile(os.path.join(EXAMPLES, "digits.onnx"), "llvm")
    recent = tth.recent_targets()
    assert [r["target"] for r in recent[:2]] == ["llvm", '{"kind":"c"}'], recent
    assert recent[0]["string"].startswith("llvm ") and recent[0]["model"] == "digits"
    assert recent[0]["uses"] >= 1
