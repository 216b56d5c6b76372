"""The one place that makes a shipped C source self-contained: each line `#include "<name>"`
naming one of the given headers is replaced by that header's text (runtime/params/tth_params.h:
docs/artifact.md, "The parameters file and its reader"). Used by meson/embed_text.py and
plugins/ethosn/model/embed.py."""
import os
import sys


def inline_headers(text, headers, src):
    """text (str) with each `#include "h"` line of a header given replaced by the header's text;
    a header that text never includes is an error (exit)."""
    by_name = {os.path.basename(h): h for h in headers}
    used = set()
    out = []
    for line in text.splitlines(True):
        words = line.split()
        name = words[1].strip('"') if len(words) == 2 and words[0] == "#include" and words[1][:1] == '"' else None
        if name in by_name:
            with open(by_name[name], "rb") as f:
                body = f.read().decode("utf-8")
            out.append(body if body.endswith("\n") else body + "\n")
            used.add(name)
        else:
            out.append(line)
    unused = sorted(set(by_name) - used)
    if unused:
        sys.exit("%s never includes %s" % (src, ", ".join(unused)))
    return "".join(out)
