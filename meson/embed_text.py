#!/usr/bin/env python3
"""embed_text.py IN OUT NAME: write OUT, a C header defining `static const char NAME[]` with the
bytes of IN (a text file that a plugin ships inside artifacts, e.g. runtime/parallel)."""
import sys

src, out, name = sys.argv[1], sys.argv[2], sys.argv[3]
with open(src, "rb") as f:
    data = f.read()
lines = ["/* generated from %s by meson/embed_text.py: do not edit */" % src.split("/")[-1],
         "static const char %s[] =" % name]
for line in data.decode("utf-8").splitlines(True):
    esc = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    lines.append('    "%s"' % esc)
lines[-1] += ";"
with open(out, "w") as f:
    f.write("\n".join(lines) + "\n")
