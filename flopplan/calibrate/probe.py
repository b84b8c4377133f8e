"""The one part of a run's wall time no run folder dates: how long its process takes to exit after its last file
(the tables it prints, then the interpreter's and torch's teardown: seconds on a CPU). Timed here in a child
process that imports what ``flopplan train`` imports, builds the tiny policy and takes one optimizer step (what
a run initialises), prints a table, and reports the time of its last statement; the parent times its exit.
Torch-free itself (the child runs torch)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

CHILD = """
import time
import torch
import flopplan.cli.train, flopplan.train.trainer
from flopplan.arch import resolve
from flopplan.measure.models import build_model
from flopplan.report.console import console
model = build_model(resolve("tiny"), device="cpu")
model(input_ids=torch.ones(2, 8, dtype=torch.long)).logits.sum().backward()
torch.optim.AdamW(model.parameters()).step()
console().print("probe")
print(repr(time.time()))
"""


def shutdown_seconds(repeats: int = 1) -> float:
    """The median, over ``repeats`` child processes, of the time from a run-like process's last statement to its
    exit. Raises OSError or ValueError when the child cannot run (no torch)."""
    times = []
    for _ in range(repeats):
        done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=dict(os.environ),
                              timeout=600)
        ended = time.time()
        if done.returncode:
            raise ValueError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "the probe failed")
        times.append(max(ended - float(done.stdout.strip().splitlines()[-1]), 0.0))
    return statistics.median(times)
