"""Where each rung of a pilot ended: the runner's record (``rung_ends.json`` in the pilot's folder), read by the
analysis to tell a rung's evaluations from its next rung's (:func:`flopplan.race.pilots.within_rung`).

A pilot continued to its next rung is the same run, so its evaluations file holds every rung's; the record says
where each rung's run ended: its step and the ledger's training FLOPs and total FLOPs then (the pilot's run
summary when the rung's run finished, for its budget or its cap). The runner writes a rung's entry once that run
has finished (:func:`flopplan.race.runner.record_rung_end`) and never changes it: a pilot continued to its next
rung adds that rung's entry when it ends. A driver killed between a pilot's end and its record writes it on its
next run, from the summary the finished pilot left (the summary still shows that rung's end: the pilot is continued
only after the runner has seen its whole rung finished). Pilots themselves do not read or write it, and a race run
before the record (a pilot without one) is read by the rule of its manifest version, as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flopplan.errors import UserError, is_int
from flopplan.fileio import atomic_write_json, read_json
from flopplan.runfile import EvalRecord, RunSummary

RUNG_ENDS = "rung_ends.json"
RUNG_ENDS_VERSION = 1
FIELDS = ("rung", "budget", "step", "train_flops", "flops")


@dataclass(frozen=True)
class RungEnd:
    """Where a pilot's run of ``rung`` (0 first) to ``budget`` FLOPs ended: after ``step``, its ledger's training
    FLOPs (evaluations excluded) ``train_flops`` and every bucket ``flops``, as :class:`flopplan.runfile.EvalRecord`
    counts them (abandoned and lost work left out)."""

    rung: int
    budget: int
    step: int
    train_flops: int
    flops: int

    @classmethod
    def of(cls, summary: RunSummary, rung: int) -> RungEnd:
        """The end of ``rung`` from the run summary its finished run left."""
        return cls(rung, int(summary.budget_flops or 0), int(summary.steps), int(summary.training_flops),
                   int(summary.flops["total"]))

    def holds(self, record: EvalRecord) -> bool:
        """Whether ``record`` was made within this rung: at or before its last step, by the step and the training
        FLOPs, which an evaluation record carries exactly (a TRL evaluation's total FLOPs may leave out its own
        cost, and a rung's last round may train past its cap: neither matters here)."""
        return record.step <= self.step and record.train_flops <= self.train_flops

    def to_data(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in FIELDS}


def recorded_ends(pilot: Path) -> dict[int, RungEnd]:
    """The rung ends recorded in the pilot folder ``pilot``, by rung; none when there is no record or it cannot be
    read (a damaged or foreign file holds none: each rung is then read as a race before the record is)."""
    path = pilot / RUNG_ENDS
    if not path.is_file():
        return {}
    try:
        data = read_json(path, "rung ends")
    except UserError:
        return {}
    entries = data.get("rungs") if isinstance(data, dict) and data.get(
        "race_rung_ends_version") == RUNG_ENDS_VERSION else None
    if not isinstance(entries, list) or not all(
            isinstance(e, dict) and all(is_int(e.get(f)) and e[f] >= 0 for f in FIELDS) for e in entries):
        return {}
    return {int(e["rung"]): RungEnd(*(int(e[f]) for f in FIELDS)) for e in entries}


def rung_end(pilot: Path, rung: int, budget: int) -> RungEnd | None:
    """Where the pilot in ``pilot`` ended ``rung`` at ``budget`` FLOPs (its design's), or None where that is not
    recorded (an entry for another budget is not this design's rung: none)."""
    end = recorded_ends(pilot).get(rung)
    return end if end is not None and end.budget == budget else None


def write_end(pilot: Path, end: RungEnd) -> None:
    """Add ``end`` to the pilot's record (atomically), keeping every other rung's entry; a rung already recorded
    is left as it is."""
    ends = recorded_ends(pilot)
    if end.rung in ends:
        return
    ends[end.rung] = end
    atomic_write_json(pilot / RUNG_ENDS, {"race_rung_ends_version": RUNG_ENDS_VERSION,
                                          "rungs": [ends[r].to_data() for r in sorted(ends)]})
