#!/usr/bin/env python3
"""embed_text.py IN OUT NAME [HEADER...]: write OUT, a C header defining `static const char NAME[]`
with the text of IN (a C source that a plugin ships inside artifacts, e.g. runtime/parallel).

A shipped source must compile on its own, so each line `#include "<HEADER's file name>"` of IN is
replaced by that HEADER's text (runtime/params/tth_params.h: docs/artifact.md, "The parameters
file and its reader"); a HEADER that IN never includes is an error. Other lines are as in IN."""
import os
import sys

from inline_headers import inline_headers  # beside this script


def main():
    src, out, name = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(src, "rb") as f:
        text = inline_headers(f.read().decode("utf-8"), sys.argv[4:], src)
    lines = ["/* generated from %s by meson/embed_text.py: do not edit */" % os.path.basename(src),
             "static const char %s[] =" % name]
    for line in text.splitlines(True):
        esc = line.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        lines.append('    "%s"' % esc)
    lines[-1] += ";"
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
