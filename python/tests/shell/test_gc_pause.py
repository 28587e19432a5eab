"""gc_pause.paused: no cyclic collection inside the block, the collector's state restored after."""

import gc

import pytest

from hackmatrix.shell import gc_pause


def test_paused_disables_collection_and_restores_it_also_on_errors():
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with gc_pause.paused():
            assert not gc.isenabled()
            raise RuntimeError
    assert gc.isenabled()


def test_paused_leaves_a_disabled_collector_disabled():
    gc.disable()
    try:
        with gc_pause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()

