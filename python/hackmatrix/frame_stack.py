"""Room on CPython's frame stack for JAX's tracing: `with_room(function, ...)`.

Since Python 3.11 the interpreter keeps its frames on a per-thread stack made of 16 KiB chunks,
each mapped from the OS on its own (`mmap`). When a call needs more room than the current chunk
has left, a new chunk is mapped; when the frame that began it returns, the chunk is unmapped
at once. JAX's tracing recurses deeply (up to ~105 frames below the caller for the env
benchmark's rollout) and goes up and down that range at every operation, so where a chunk
boundary falls inside it the interpreter maps and unmaps a chunk thousands of times, each time
faulting fresh zero pages in. Tracing and lowering the env benchmark's rollout at 1024 envs
took 30k-84k page faults, and 0.1-0.5 s longer than with room, depending only on how deep the
caller's stack happened to be (`getrusage` around the `lower` call, at caller depths 0-20;
specs/performance.md, "Frame-stack chunks while tracing").

`with_room` calls the function from a frame whose code object declares a 512 KiB value stack
that it never uses. Its frame then gets a fresh 1 MiB chunk, and every frame the call makes
(the whole of a trace) fits in the half it leaves free. Pages of the chunk that nothing touches
are never faulted in, so the room costs address space only. On other interpreters, or before
3.11, it is a plain call.
"""

from __future__ import annotations

import sys

# In words (pointers): 512 KiB of declared value stack, so the frame's chunk is 1 MiB.
_ROOM_WORDS = 1 << 16


def _call(function, args, kwargs):
    return function(*args, **kwargs)


if sys.implementation.name == "cpython" and sys.version_info >= (3, 11):
    _call.__code__ = _call.__code__.replace(co_stacksize=_ROOM_WORDS)


def with_room(function, *args, **kwargs):
    """`function(*args, **kwargs)`, its call chain kept in one chunk of the frame stack."""
    return _call(function, args, kwargs)
