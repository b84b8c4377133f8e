"""Timing and counting one block of model work: wall-clock (CUDA events on a GPU) and, when asked, torch's
FlopCounterMode count of the same block (taken by :class:`~flopplan.measure.meter.FlopMeter`, which leaves
what runs unchanged)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import torch

from flopplan.measure.meter import FlopMeter


@contextlib.contextmanager
def timed_and_counted(measure: bool, sync: bool) -> Iterator[dict[str, Any]]:
    """Time a block (with CUDA events when ``sync``, the GPU's own clock) and, with ``measure``, count it with
    :class:`FlopMeter` (FlopCounterMode's count; torch's FlopCounterMode itself would run some ops through their
    decompositions, changing results in the last bits). Yields a dict that holds ``seconds`` and ``measured``
    (None unless measured) afterwards."""
    out: dict[str, Any] = {"measured": None, "seconds": 0.0}
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
        out["measured"] = int(counter.get_total_flops())  # type: ignore[union-attr]
