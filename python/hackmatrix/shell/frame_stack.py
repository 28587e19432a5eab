"""Room on CPython's frame stack for JAX's tracing: `with_room(function, ...)`.

Since Python 3.11 the interpreter keeps its frames on a per-thread stack made of 16 KiB chunks,
each mapped from the OS on its own (`mmap`). When a call needs more room than the current chunk
has left, a new chunk is mapped; when the frame that began it returns, the chunk is unmapped
at once. JAX's tracing recurses deeply (up to ~105 frames below the caller for the env
benchmark's rollout) and goes up and down that range at every operation, so where a chunk
boundary falls inside it the interpreter maps and unmaps a chunk thousands of times, each time
faulting fresh zero pages in. Kept because tracing and lowering the env benchmark's rollout at
256 envs (`benchmark.py env --num-envs 256`) takes 1.73 s of CPU and 8.3k page faults with room,
1.85-2.44 s and 29k-40k faults without, at caller depths 0-13 (CPU time and `getrusage` around
its `lower`).

`with_room` calls the function from a frame whose code object declares a 512 KiB value stack
that it never uses. Its frame then gets a fresh 1 MiB chunk, and every frame the call makes
(the whole of a trace) fits in the half it leaves free. Pages of the chunk that nothing touches
are never faulted in, so the room costs address space only. That frame's code is a copy of
`_call`'s made at the first call, so importing the module changes no code object. On other
interpreters, or before 3.11, it is a plain call.
"""

from __future__ import annotations

import functools
import sys
import types

# In words (pointers): 512 KiB of declared value stack, so the frame's chunk is 1 MiB.
_ROOM_WORDS = 1 << 16


def _call(function, args, kwargs):
    return function(*args, **kwargs)


@functools.cache
def _call_with_room():
    """`_call` with a copy of its code that declares the room, made at the first `with_room`
    (`_call`'s own code stays as compiled); `_call` itself where frames live elsewhere."""
    if sys.implementation.name != "cpython" or sys.version_info < (3, 11):
        return _call
    return types.FunctionType(_call.__code__.replace(co_stacksize=_ROOM_WORDS), globals())


def with_room(function, *args, **kwargs):
    """`function(*args, **kwargs)`, its call chain kept in one chunk of the frame stack."""
    return _call_with_room()(function, args, kwargs)
