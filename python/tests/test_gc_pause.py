"""gc_pause.paused: no cyclic collection inside the block, the collector's state restored after."""

import gc

import pytest

from hackmatrix import gc_pause


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


def test_a_program_started_by_load_main_has_its_imports_frozen(tmp_path, monkeypatch):
    """launch.load_main leaves what the program imported out of later collections."""
    from hackmatrix import launch

    (tmp_path / "tiny_program.py").write_text("def main():\n    return 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    gc.unfreeze()
    try:
        main = launch.load_main("tiny_program")
        assert gc.get_freeze_count() > 0
        assert gc.is_tracked(main) and all(tracked is not main for tracked in gc.get_objects())
    finally:
        gc.unfreeze()
