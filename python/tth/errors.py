"""The exceptions of the tth package.

A failed request to tthd raises :class:`CompileError` (or a subclass) carrying the daemon's answer:
its JSON-RPC code, libtth's symbolic code, the diagnostics, and from them the location, the node,
the hint and the "did you mean" suggestion. ``str()`` reads like tthctl's message
(client/output.c): ``error: MESSAGE`` then ``at:`` and ``hint:`` lines.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

# libtth's symbolic codes by JSON-RPC code (protocol/PROTOCOL.md, section 8: -32000 - abs(TTH_E*))
TTH_CODES = {
    -32001: "EINVAL", -32002: "ENOMEM", -32003: "ENOENT", -32004: "EIO", -32005: "EPARSE",
    -32006: "EUNKNOWN", -32007: "ETYPE", -32008: "EABI", -32009: "EPLUGIN", -32010: "EUNSUPPORTED",
    -32011: "EPERM", -32012: "EDUPLICATE", -32013: "ECANCELLED", -32014: "ETIMEOUT", -32015: "EMODEL",
    -32016: "ELIMIT", -32017: "EINTERNAL", -32018: "ECRASH",
}
# the protocol's own codes
RPC_NAMES = {
    -32700: "ParseError", -32600: "InvalidRequest", -32601: "MethodNotFound", -32602: "InvalidParams",
    -32603: "InternalError", -32800: "RequestCancelled", -32100: "ProtocolVersionMismatch",
    -32101: "NotInitialized", -32102: "FrameTooLarge", -32103: "RequestTooLarge",
    -32104: "TooManyRequests", -32105: "PeerRefused", -32106: "ShuttingDown", -32107: "BadFrame",
    -32108: "UnexpectedBinary",
}

_SEVERITY = {1: "error", 2: "warning", 3: "note", 4: "hint"}


class TthError(Exception):
    """Base class of every error this package raises on purpose."""


class DaemonError(TthError):
    """tthd could not be reached, started, or spoke out of protocol. ``location`` names the socket
    (or the log of a daemon that did not start), ``hint`` says what to do."""

    def __init__(self, message: str, location: str = "", hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.location = location
        self.hint = hint

    def __str__(self) -> str:
        return _block("error", self.message, self.location, self.hint, "")


class CompileError(TthError):
    """The daemon answered a request with an error.

    Attributes: ``code`` (JSON-RPC code, e.g. -32005), ``tth_code`` (libtth's name, e.g.
    ``"EPARSE"``, or the protocol's name such as ``"RequestTooLarge"``), ``message``,
    ``diagnostics`` (list of dicts: code, severity, message, location, hint), ``location`` (the
    first error diagnostic's, or what the request was about), ``stage`` (the compile stage that
    was running, from the daemon's progress reports, or ``None``), ``node`` (the ONNX node named
    by a diagnostic, or ``None``), ``hint``, ``did_you_mean`` (the suggestion of a hint
    ``did you mean 'X'?``, or ``None``), ``data`` (the error's raw ``data`` object).
    """

    def __init__(self, error: Dict[str, Any], context: str = "", stage: Optional[str] = None) -> None:
        self.code: int = int(error.get("code", 0))
        self.message: str = str(error.get("message", "the daemon answered an error"))
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        self.data: Dict[str, Any] = data
        self.tth_code: str = str(data.get("tthCode") or TTH_CODES.get(self.code) or RPC_NAMES.get(self.code, ""))
        diags = data.get("diagnostics")
        self.diagnostics: List[Dict[str, Any]] = [d for d in diags if isinstance(d, dict)] if isinstance(diags, list) else []
        self.context = context
        self.stage = stage
        first = next((d for d in self.diagnostics if d.get("severity", 1) in (0, 1)), None)
        self.location: str = str(first.get("location", "")) if first else ""
        self.hint: str = str(first.get("hint", "")) if first else ""
        if not self.location:
            self.location = context
        self.node: Optional[str] = None
        for d in self.diagnostics:
            m = re.search(r"node '([^']*)'", str(d.get("location", "")) + " " + str(d.get("message", "")))
            if m:
                self.node = m.group(1)
                break
        m = re.search(r"did you mean '([^']*)'", " ".join(str(d.get("hint", "")) for d in self.diagnostics))
        self.did_you_mean: Optional[str] = m.group(1) if m else None
        super().__init__(self.message)

    def __str__(self) -> str:
        """The message as tthctl prints it (client/output.c, tthctl_error_print)."""
        errs = [d for d in self.diagnostics if d.get("severity", 1) in (0, 1)]
        if errs:
            return "\n".join(_block(_SEVERITY.get(int(d.get("severity", 1) or 1), "error"), str(d.get("message", "")),
                                    str(d.get("location", "")), str(d.get("hint", "")), self.context)
                             for d in self.diagnostics)
        name = self.tth_code or "libtth"
        text = _block("error", "%s (%s, code %d)" % (self.message, name, self.code), self.context, "", "")
        for d in self.diagnostics:
            text += "\n" + _block(_SEVERITY.get(int(d.get("severity", 1) or 1), "error"), str(d.get("message", "")),
                                  str(d.get("location", "")), str(d.get("hint", "")), self.context)
        return text


class TargetError(CompileError):
    """The target does not parse or names an unknown kind, attribute or tag (EPARSE, EUNKNOWN,
    ETYPE about the target)."""


class ModelError(CompileError):
    """The model cannot be read or is not a valid ONNX model (EMODEL, or a parse error of the
    model), or an option names something the model lacks (EINVAL)."""


class UnsupportedError(CompileError):
    """The model or the request needs something tth does not do (EUNSUPPORTED)."""


class LimitError(CompileError):
    """A limit of the daemon was reached: request size (RequestTooLarge), frame size, requests in
    flight, request time (ETIMEOUT) or worker memory (ELIMIT)."""


class CancelledError(CompileError):
    """The request was cancelled (RequestCancelled)."""


class RunError(TthError):
    """Running an artifact on this machine failed: a wrong input (dtype, shape, name), an
    artifact without a library for this machine, or a non-zero status of the model's code.
    ``input`` names the input concerned (or ``None``)."""

    def __init__(self, message: str, hint: str = "", input: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.input = input

    def __str__(self) -> str:
        return self.message + ("\n  hint: " + self.hint if self.hint else "")


def _block(severity: str, message: str, location: str, hint: str, context: str) -> str:
    """One diagnostic as tthctl prints it (print_one in client/output.c), without its 'tthctl: '."""
    lines = ["%s: %s" % (severity, message or "(no message)")]
    ll = len(location)
    if ll and context and context.startswith(location) and context[ll:ll + 1] == " ":
        lines.append("  at: " + context)
    elif location and context and "'" not in location:
        lines.append("  at: '%s' in %s" % (location, context))
    elif location:
        lines.append("  at: " + location)
    elif context:
        lines.append("  at: " + context)
    if hint:
        lines.append("  hint: " + hint)
    return "\n".join(lines)


def error_for(error: Dict[str, Any], context: str = "", stage: Optional[str] = None,
              target_context: str = "") -> CompileError:
    """The exception for a JSON-RPC error object of the daemon: the subclass by its code and the
    stage it failed in. As tthctl (client/compile.c): a parse, unknown-name or type error before the
    compile went past target parsing is the target's, and is shown in the target's context."""
    code = int(error.get("code", 0))
    data = error.get("data") if isinstance(error.get("data"), dict) else {}
    name = str(data.get("tthCode") or TTH_CODES.get(code, ""))
    cls: type = CompileError
    if code == -32800 or name == "ECANCELLED":
        cls = CancelledError
    elif code in (-32102, -32103, -32104) or name in ("ELIMIT", "ETIMEOUT"):
        cls = LimitError
    elif name == "EUNSUPPORTED":
        cls = UnsupportedError
    elif name in ("EPARSE", "EUNKNOWN", "ETYPE") and target_context and stage in (None, "upload", "target"):
        cls = TargetError
        context = target_context
    elif name in ("EMODEL", "EPARSE", "EINVAL", "ETYPE", "EUNKNOWN"):
        cls = ModelError
    return cls(error, context, stage)
