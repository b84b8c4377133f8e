"""Ctrl-C for the training loop (flopplan/train/interrupt.py): a second SIGINT within the window is the first one
again (a race runner passes on the Ctrl-C a terminal already sent its pilots); a later one stops at once; the
handler before is put back."""

from __future__ import annotations

import os
import signal
import time

import pytest

from flopplan.train import interrupt
from flopplan.train.interrupt import CtrlC


def _sigint() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)  # the handler runs at the next bytecode boundary


def test_a_second_sigint_within_the_window_is_the_first_and_a_later_one_stops_at_once(monkeypatch):
    before = signal.getsignal(signal.SIGINT)
    ctrl = CtrlC()
    with ctrl.handling():
        assert not ctrl.requested
        _sigint()
        assert ctrl.requested
        _sigint()  # the same Ctrl-C passed on: no KeyboardInterrupt
        monkeypatch.setattr(interrupt, "SAME_CTRL_C", 0.0)  # the window over
        with pytest.raises(KeyboardInterrupt):
            _sigint()
    assert signal.getsignal(signal.SIGINT) is before


def test_a_run_stopped_within_the_window_waits_it_out_with_its_handler(monkeypatch):
    """The copy of a Ctrl-C may arrive after the run has stopped: until the window ends the handler takes it."""
    waits: list[tuple[float, object]] = []
    ctrl = CtrlC()
    real_sleep = time.sleep
    with ctrl.handling():
        _sigint()
        monkeypatch.setattr(interrupt.time, "sleep", lambda s: waits.append((s, signal.getsignal(signal.SIGINT))))
    monkeypatch.setattr(interrupt.time, "sleep", real_sleep)
    assert len(waits) == 1 and 0 < waits[0][0] <= interrupt.SAME_CTRL_C  # the rest of the window, asked for
    assert callable(waits[0][1]) and waits[0][1] is not signal.getsignal(signal.SIGINT)  # with its handler on
