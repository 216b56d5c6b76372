#!/usr/bin/env python3
"""embed_bytes.py OUT NAME IN: write OUT, a C header defining `static const unsigned char NAME[]`
with the bytes of IN and `#define NAME_len` with their count (the runtime's core objects, which
the llvm-cpu plugin hands to the host's build: docs/artifact.md, "The host library")."""
import os
import sys


def main():
    out, name, src = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(src, "rb") as f:
        data = f.read()
    lines = ["/* generated from %s by meson/embed_bytes.py: do not edit */" % os.path.basename(src),
             "#define %s_len %d" % (name, len(data)),
             "static const unsigned char %s[%d] = {" % (name, max(len(data), 1))]
    for i in range(0, len(data), 20):
        lines.append("    " + ", ".join("%d" % b for b in data[i:i + 20]) + ",")
    lines.append("};")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
