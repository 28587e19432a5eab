"""frame_stack.with_room: a plain call, whose deep call chains stop remapping frame-stack chunks."""

import sys

import pytest

from hackmatrix.shell import frame_stack

DIVES = 2000
DIVE_DEPTH = 400  # frames of >= 80 bytes: past at least one 16 KiB chunk boundary


def _dive(depth):
    return 0 if depth == 0 else _dive(depth - 1)


def _page_faults_of_dives() -> int:
    """Minor page faults while recursing DIVE_DEPTH frames down and back up, DIVES times."""
    resource = pytest.importorskip("resource")  # POSIX only
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(DIVES):
        _dive(DIVE_DEPTH)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_with_room_is_a_plain_call():
    assert frame_stack.with_room(lambda a, b=0, *, c: (a, b, c), 1, c=3) == (1, 0, 3)
    with pytest.raises(KeyError, match="missing"):
        frame_stack.with_room({}.__getitem__, "missing")


def test_deep_recursion_inside_the_room_maps_no_new_chunks():
    faults = frame_stack.with_room(_page_faults_of_dives)
    # Without room, each dive that crosses a chunk boundary maps a fresh chunk: >= 1 fault.
    assert faults < DIVES // 10


@pytest.mark.skipif(sys.implementation.name != "cpython" or sys.version_info < (3, 11),
                    reason="frames live in stack chunks from CPython 3.11 on")
def test_without_room_the_same_recursion_remaps_a_chunk_per_dive():
    # The premise of with_room: from an ordinary (shallow) frame, the dives cross a chunk
    # boundary, and the chunk beyond it is unmapped and mapped again on every dive (measured
    # on CPython 3.11, 3.12 and 3.13: 16,000 faults).
    assert _page_faults_of_dives() >= DIVES
