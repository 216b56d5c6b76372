"""tth from Python: compile ML models through the tth daemon (tthd) and run the artifacts on numpy
arrays on this machine. Documentation: docs/python.md in the tth repository.

    import tth, numpy as np
    art = tth.compile("examples/digits.onnx", "llvm")
    out = art.run(image=np.load("examples/digit_input.npy"))
"""
from ._client import configure, socket_path
from ._compile import cache_clear, compile, parse_target, plugins, recent_targets, shutdown, status, tags, targets
from .artifact import Artifact, TensorInfo
from .errors import (CancelledError, CompileError, DaemonError, LimitError, ModelError, RunError, TargetError,
                     TthError, UnsupportedError)

__version__ = "0.1.0"
__all__ = ["compile", "targets", "tags", "recent_targets", "parse_target", "plugins", "status", "cache_clear", "shutdown",
           "configure", "socket_path", "Artifact", "TensorInfo", "TthError", "CompileError", "TargetError",
           "ModelError", "UnsupportedError", "LimitError", "CancelledError", "DaemonError", "RunError"]
