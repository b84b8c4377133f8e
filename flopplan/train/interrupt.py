"""Ctrl-C for a training loop: the first SIGINT asks the loop to stop after its current phase (the loop reads
:attr:`CtrlC.requested`); one more, later than :data:`SAME_CTRL_C`, stops it at once (KeyboardInterrupt)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SAME_CTRL_C = 1.0
"""Seconds within which a second SIGINT is the first one again: a terminal's Ctrl-C reaches a race's pilots both
directly (they share the runner's process group) and as the runner passes it on (``flopplan.race.pilots``). A
second one later than this stops the run at once; a run that stopped sooner waits out the rest of it with its
handler in place, so the copy cannot arrive after it and kill the process."""


class CtrlC:
    """Whether a stop was asked for by SIGINT, while :meth:`handling` is in place."""

    def __init__(self) -> None:
        self.requested = False
        self._at = 0.0

    @contextmanager
    def handling(self) -> Iterator[None]:
        """SIGINT handled as the module says for the ``with`` block; the handler before it is put back after."""
        previous = signal.getsignal(signal.SIGINT)

        def on_interrupt(signum: int, frame: Any) -> None:
            if self.requested and time.monotonic() - self._at > SAME_CTRL_C:  # a second Ctrl-C: stop now
                signal.signal(signal.SIGINT, previous)
                raise KeyboardInterrupt
            if not self.requested:
                self.requested, self._at = True, time.monotonic()

        signal.signal(signal.SIGINT, on_interrupt)
        try:
            yield
        finally:
            if self.requested:  # the same Ctrl-C may still be on its way (passed on by a race runner)
                time.sleep(max(0.0, self._at + SAME_CTRL_C - time.monotonic()))
            signal.signal(signal.SIGINT, previous)
