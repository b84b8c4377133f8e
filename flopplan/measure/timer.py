"""Timing and counting one block of model work: wall-clock (CUDA events on a GPU) and, when asked, torch's
FlopCounterMode count of the same block and its named blind spots (taken by
:class:`~flopplan.measure.meter.FlopMeter`, which leaves what runs unchanged); and a process's own clocks
(:class:`ProcessClock`), which a run writes on its metrics lines."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any

import torch

from flopplan.fileio import proc_stat
from flopplan.measure.meter import FlopMeter


@contextlib.contextmanager
def timed_and_counted(measure: bool, sync: bool) -> Iterator[dict[str, Any]]:
    """Time a block (with CUDA events when ``sync``, the GPU's own clock) and, with ``measure``, count it with
    :class:`FlopMeter` (FlopCounterMode's count; torch's FlopCounterMode itself would run some ops through their
    decompositions, changing results in the last bits). Yields a dict that holds ``seconds``, ``measured``
    (None unless measured: FlopCounterMode's count plus its named blind spots, :attr:`FlopMeter.executed`) and
    ``blind`` (the blind spots that counted anything, by name: e.g. ``grouped_mm`` experts) afterwards."""
    out: dict[str, Any] = {"measured": None, "seconds": 0.0, "blind": {}}
    counter = FlopMeter() if measure else contextlib.nullcontext()
    if sync:
        start_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start_event.record()
    start = time.perf_counter()
    with counter:
        yield out
    if sync:
        end_event.record()
        end_event.synchronize()
        out["seconds"] = start_event.elapsed_time(end_event) / 1000.0
    else:
        out["seconds"] = time.perf_counter() - start
    if measure:
        out["measured"] = int(counter.executed)  # type: ignore[union-attr]
        out["blind"] = {name: flops for name, flops in counter.blind.items() if flops}  # type: ignore[union-attr]


def process_started() -> float | None:
    """When this process started, on the wall clock (Linux: /proc/self/stat field 22, clock ticks after boot), so
    that the first metrics line a process writes dates its start-up (imports, models, data) for time models."""
    fields = proc_stat()
    if fields is None or len(fields) < 20 or not fields[19].isdigit():
        return None
    try:
        return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME) + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, AttributeError):  # no boot-time clock or tick rate here
        return None


class ProcessClock:
    """This process's clocks, for the run's files: its start (on its first metrics line, so that time models learn
    the start-up), its CPU seconds on every line (all threads, since it started: the share of the cores it had),
    and the run's wall seconds so far (earlier processes' as their last checkpoint had them, ``before``)."""

    def __init__(self) -> None:
        self.started = process_started()
        self.began = self.started or time.time()
        self.before: float | None = 0.0  # None: an earlier process's wall time is unknown
        self._pending = self.started

    def line(self, threads: int) -> dict[str, Any]:
        """The clock fields of a metrics line (and the process's start, on its first)."""
        fields: dict[str, Any] = {"time": time.time(), "cpu_seconds": time.process_time(), "threads": threads}
        if self._pending is not None:
            fields["process_started"], self._pending = self._pending, None
        return fields

    def wall(self) -> float | None:
        return None if self.before is None else self.before + time.time() - self.began

    def core_share(self, threads: int) -> float | None:
        """This process's CPU seconds over its wall seconds and threads (at most 1)."""
        now = time.time() - self.began
        return min(time.process_time() / threads / now, 1.0) if now > 0 else None
