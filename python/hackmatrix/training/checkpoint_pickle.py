"""What a checkpoint's pickle may hold: NumPy values in Python's plain containers, written by a
pickler that refuses anything else and read by an unpickler that loads no other global, so a
crafted or foreign pickle runs nothing (`checkpoint.read_checkpoint` reads through it)."""

from __future__ import annotations

import pickle
import sys
from typing import Any, NamedTuple

import numpy as np


class Unreadable(NamedTuple):
    """Why a file did not unpickle (one line, for the CheckpointError that names the file)."""
    reason: str


# The only globals a checkpoint's pickle refers to: NumPy's arrays, scalars and dtypes (the
# trainer stores every leaf as NumPy, in plain dicts, lists and tuples), and what older pickle
# protocols name for sets and bytes (builtins, and `_codecs.encode` for bytes below protocol 3).
# A pickle runs whatever its globals name while it loads, so any other name marks a crafted or
# foreign file. `CheckpointPickler` keeps the trainer's own checkpoints within these.
CHECKPOINT_GLOBALS = frozenset({
    ("numpy", "dtype"), ("numpy", "ndarray"),
    # NumPy 2's names, and NumPy 1's for the same functions (NumPy 2 reads those too).
    *((f"{package}.{module}", name) for package in ("numpy._core", "numpy.core")
      for module, name in (("numeric", "_frombuffer"), ("multiarray", "_reconstruct"),
                           ("multiarray", "scalar"))),
    ("_codecs", "encode"),
    *((module, name) for module in ("builtins", "__builtin__")
      for name in ("set", "frozenset", "bytes", "bytearray"))})


class _ForeignGlobal(pickle.UnpicklingError):
    pass


class CheckpointPickler(pickle.Pickler):
    """Refuses, before the file is replaced, any object that the reader would refuse: NumPy
    arrays, scalars and dtypes, and Python's plain values and containers, pickle without other
    globals (pickle asks `reducer_override` about every object but None, booleans and exact
    ints, floats, bytes, str, dict, set, frozenset, list and tuple)."""

    def reducer_override(self, obj):
        if type(obj) is np.ndarray or isinstance(obj, (np.generic, np.dtype, bytearray)):
            return NotImplemented  # pickled as usual
        # The functions and classes those values pickle through, each saved by its name.
        if (getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)) in \
                CHECKPOINT_GLOBALS:
            return NotImplemented
        raise TypeError(f"a checkpoint cannot hold a {type(obj).__module__}."
                        f"{type(obj).__qualname__}: its reader loads only NumPy values and plain "
                        "containers (store it as those)")


class _CheckpointUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) not in CHECKPOINT_GLOBALS:
            raise _ForeignGlobal(f"{module}.{name}")
        return super().find_class(module, name)


def unpickled(file) -> Any:
    """The object pickled in `file`, or Unreadable. Only the globals of `CHECKPOINT_GLOBALS`
    load: a pickle naming any other is refused before it runs anything.
    pickle raises many types on truncated or foreign files; the error is dropped here, with the
    hook that prints what the interpreter reports meanwhile: freeing a bytearray that a corrupt
    BYTEARRAY8 opcode sized past memory prints a SystemError line (CPython 3.11-3.13), which
    would break the one-line error."""
    excepthook, sys.excepthook = sys.excepthook, lambda *report: None
    try:
        with file:
            return _CheckpointUnpickler(file).load()
    except _ForeignGlobal as error:
        return Unreadable(f"not loaded: it names {error}, which no checkpoint does (a crafted "
                           "or foreign pickle)")
    except Exception as error:  # `error` and its frames are freed right here
        return Unreadable(f"truncated, or not a checkpoint ({type(error).__name__})")
    finally:
        sys.excepthook = excepthook
