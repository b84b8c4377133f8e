"""The run folder's record of a metered TRL run as it goes (:func:`attach_step_log`).

Rank 0 writes the step log: a committed round's ledger and metrics line (with TRL's logged metrics and an
evaluation run at that boundary), when the next step begins, at a save and at the end, and the summary at the end.
Until a round commits, its work is known only process by process (the processes sum it at the round's end), so
every process keeps its own share of the round in progress on disk as each unit ends (rank 0 in
``progress.jsonl``, rank r in ``progress.rank{r}.jsonl``: :meth:`flopplan.train.runfolder.RunFolder.set_progress`);
a kill mid-round loses every process's share, and a resume charges them all
(:meth:`~flopplan.train.runfolder.RunFolder.lost_after`, which places every line by the commit count it carries:
an evaluation can be logged after its round's line, as a second line for the same step). A process whose run
folder is not the one rank 0 writes
(several nodes without a shared file system) leaves its share where rank 0 cannot read it: that share is then
missing from the lost work.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from transformers import TrainerCallback

from flopplan.engines.trl_meter import TRLMeter
from flopplan.guard import metrics_line
from flopplan.measure.timer import ProcessClock


def attach_step_log(trainer: Any, meter: TRLMeter, budget_callback: Any) -> StepLog | None:
    """Rank 0's :class:`StepLog` (returned; None elsewhere or without a run folder) or another process's
    :class:`RankProgress`, hooked to the meter's units and ``budget_callback``'s commits."""
    if meter.folder is None:
        return None
    if not trainer.accelerator.is_main_process:
        share = RankProgress(meter, trainer.accelerator.process_index)
        meter.on_unit.append(share.progress)
        budget_callback.on_commit.append(share.round_committed)
        budget_callback.on_evaluation.append(share.evaluation_committed)
        return None
    log = StepLog(meter)
    budget_callback.on_commit.append(log.round)
    budget_callback.on_evaluation.append(log.evaluation)
    meter.on_unit.append(log.progress)
    trainer.add_callback(log)
    return log


class RankProgress:
    """Process ``rank``'s (> 0) share of the round and evaluation in progress, as the run folder's
    ``progress.rank{rank}.jsonl``, rewritten as each unit ends: the round's share under the round's step, an
    evaluation's under the step whose line it commits into (the round before it). Each line carries the
    process's commit count (:attr:`TRLMeter.commits`); after a commit the share it summed stays on disk, with its
    count, until the next commit replaces it, since rank 0 may not yet have written the summed line that holds it,
    and :meth:`~flopplan.train.runfolder.RunFolder.lost_after` reads a share as summed once rank 0 has written after
    the commit that holds it, or once a logged line's count reaches that commit. The share the commit did not sum
    (the round under way, when an evaluation commits mid-round) is written again at once under the new count."""

    def __init__(self, meter: TRLMeter, rank: int) -> None:
        assert meter.folder is not None and rank > 0
        self.meter, self.folder, self.rank = meter, meter.folder, rank
        self.previous: list[tuple[int, list[dict[str, Any]], int]] = []  # the share as written before the commit
        self.current: list[tuple[int, list[dict[str, Any]], int]] = []

    def progress(self) -> None:
        m, count = self.meter, self.meter.commits
        self.current = [(m.rounds + 1, [c.to_data() for c in m.local_charges(False).values()], count),
                        (m.rounds, [c.to_data() for c in m.local_charges(True).values()], count)]
        self.folder.set_progress([*self.previous, *self.current], rank=self.rank)

    def round_committed(self, _: list[Any]) -> None:
        self._committed(0)

    def evaluation_committed(self, _: list[Any]) -> None:
        self._committed(1)

    def _committed(self, summed: int) -> None:
        """The share at ``summed`` in :attr:`current` (0: the round's, 1: the evaluation's) was summed: it stays on
        disk under its count; the other is written again under the new count (it belongs to a later commit: left
        under the old one, it read as summed in this commit until this process's next unit ended)."""
        self.previous = self.current[summed:summed + 1]
        self.progress()


class StepLog(TrainerCallback):
    """The run folder's step log (rank 0): a committed round's ledger and metrics line (with TRL's logged metrics
    and an evaluation run at that boundary), written when the next step begins, at a save and at the end; the
    summary at the end."""

    def __init__(self, meter: TRLMeter) -> None:
        self.meter, self.folder = meter, meter.folder
        self.clock = ProcessClock()  # the clock fields every engine's metrics lines carry
        self.pending: dict[str, Any] | None = None

    def _line(self) -> dict[str, Any]:
        if self.pending is None:
            self.pending = {"step": self.meter.rounds, "charges": [], "metrics": {}, "flops": {}}
        return self.pending

    def round(self, committed: list[Any]) -> None:
        self.flush()
        line = self._line()
        line["charges"] += [c.to_data() for c in committed]
        line["flops"] = self.meter.last_flops
        self.progress()

    def evaluation(self, committed: list[Any]) -> None:
        line = self._line()
        line["charges"] += [c.to_data() for c in committed]
        line["flops"] = self.meter.last_flops
        self.progress()

    def progress(self) -> None:
        """What ran since the last line written: the committed round not yet written (under its own step) and the
        units of the round and evaluation in progress (this process's: on several processes, rank 0's share; under
        the next step), as the run folder's steps in progress, so a kill leaves a record of the work it lost
        (cleared when the next line is written)."""
        count = self.meter.commits
        done = [(self.pending["step"], list(self.pending["charges"]), count, True)] if self.pending else []
        self.folder.set_progress([*done, self._running()])

    def _running(self) -> tuple[int, list[dict[str, Any]], int]:
        """This process's share of the round and evaluation in progress, under the next step."""
        running = [c.to_data() for evaluation in (False, True) for c in self.meter.local_charges(evaluation).values()]
        return self.meter.rounds + 1, running, self.meter.commits

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **_: Any) -> Any:
        if self.pending is not None:
            self.pending["metrics"].update({k: v for k, v in (logs or {}).items() if isinstance(v, (int, float))
                                            and math.isfinite(v) and not k.startswith("flops/")})
        return control

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self.flush()
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self.flush()
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self.flush()
        self.folder.write_summary(self.meter.summary(**self.meter.summary_fields))
        if self.meter.owns_folder:
            self.folder.unlock()
        return control

    def flush(self) -> None:
        line, self.pending = self.pending, None
        if line is None:
            return
        metrics = dict(line["metrics"])
        accuracy = self.meter.accuracy_metric
        if accuracy in metrics:
            metrics.setdefault("accuracy", metrics[accuracy])
        record = metrics_line(line["step"], metrics, line["flops"], self.clock.line(torch.get_num_threads()))
        # what has run since stays on disk: a line written mid-round (an evaluation at an epoch's end that is not a
        # round's) leaves the round's units so far in progress, where clearing them lost them until the next unit
        self.folder.append(line["step"], line["charges"], record, commits=self.meter.commits,
                           progress=[self._running()])
