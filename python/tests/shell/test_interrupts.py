"""hackmatrix/shell/interrupts.py and launch.py: SIGINT/SIGTERM raise `Interrupted` where the program
can take it: not inside an import, and not lost in a callback whose exceptions Python ignores."""

import os
import signal
import sys
import threading
import time

import pytest

from hackmatrix.shell import interrupts, launch


class RaisesWhenCollected:
    """Raises `Interrupted` when collected: in a callback whose exceptions Python ignores."""

    def __del__(self):
        raise interrupts.Interrupted("SIGTERM")


def test_an_interrupt_lost_in_a_callback_is_delivered_again():
    # A handler can run inside a callback whose exceptions Python ignores (JAX's
    # garbage-collection callback, a __del__): its Interrupted was printed as "Exception
    # ignored" and the program went on (the tools to exit 0).
    started = time.monotonic()
    with pytest.raises(interrupts.Interrupted, match="SIGTERM"):
        with interrupts.signals_raise():
            RaisesWhenCollected()  # collected at once, inside the interpreter: the raise is lost
            time.sleep(30)  # the signal sent again interrupts this
    assert time.monotonic() - started < 10


def test_a_signal_sent_again_while_the_hook_still_runs_is_not_lost(monkeypatch):
    # On a loaded machine the helper thread's send can come before the hook has returned: the
    # handler then ran inside the hook, whose exceptions Python ignores too (a CI run lost it).
    real_timer, sends = threading.Timer, []

    class FirstSendAtOnce:
        def __init__(self, delay, send):
            self.delay, self.send = delay, send

        def start(self):
            sends.append(self.delay)
            if len(sends) == 1:
                self.send()  # the handler runs before the hook returns
            else:
                real_timer(self.delay, self.send).start()

    monkeypatch.setattr(threading, "Timer", FirstSendAtOnce)
    started = time.monotonic()
    with pytest.raises(interrupts.Interrupted, match="SIGTERM"):
        with interrupts.signals_raise():
            RaisesWhenCollected()
            time.sleep(30)
    assert time.monotonic() - started < 10
    assert sends == [interrupts.REDELIVERY_DELAY_SECONDS] * 2


def _module_that_signals_while_imported(tmp_path, monkeypatch, name):
    (tmp_path / f"{name}.py").write_text(
        "import os, signal, time\n"
        "os.kill(os.getpid(), signal.SIGINT)\n"
        "time.sleep(0.3)  # the handler runs here, inside the import\n"
        "def main():\n    return 'imported to the end'\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_signal_during_an_import_interrupts_once_the_import_is_done(tmp_path, monkeypatch):
    # Raised inside JAX's import, an exception can abort the interpreter (nanobind's
    # `terminate called after throwing`): the handler waits for the import to end.
    _module_that_signals_while_imported(tmp_path, monkeypatch, "signals_while_imported")
    started, imported = time.monotonic(), []
    with pytest.raises(interrupts.Interrupted, match="SIGINT"):
        with interrupts.signals_raise():
            import signals_while_imported
            imported.append(signals_while_imported.main())
            time.sleep(30)
    assert imported == ["imported to the end"]
    assert time.monotonic() - started < 10


def test_a_signal_while_the_program_starts_exits_7_after_the_import(tmp_path, monkeypatch,
                                                                  capsys):
    _module_that_signals_while_imported(tmp_path, monkeypatch, "signals_while_starting")
    before = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
    with pytest.raises(SystemExit) as exit_request:
        launch.load_main("signals_while_starting")
    assert exit_request.value.code == launch.EXIT_INTERRUPTED
    assert capsys.readouterr().err == "interrupted by SIGINT while starting\n"
    assert "signals_while_starting" in sys.modules  # imported to the end
    assert {s: signal.getsignal(s) for s in interrupts.SIGNALS} == before


def test_handlers_and_hook_come_back_after_the_block():
    before = ({s: signal.getsignal(s) for s in interrupts.SIGNALS}, sys.unraisablehook)
    with pytest.raises(interrupts.Interrupted):
        with interrupts.signals_raise():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
    assert ({s: signal.getsignal(s) for s in interrupts.SIGNALS}, sys.unraisablehook) == before
