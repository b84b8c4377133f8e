"""The budget guard of every evaluation of a metered GRPOTrainer (:func:`guard_evaluations`).

``trainer.evaluate`` is wrapped on the instance, so every evaluation passes the guard: those training runs
(transformers 5.25 calls ``self.evaluate`` from ``Trainer._evaluate``, ``trainer.py:3354``, for ``eval_strategy``,
``eval_on_start`` and an evaluation a callback asks for with ``control.should_evaluate``, ``trainer.py:2314``), and a
script's own calls before or after ``train()``. Their work was always charged (the meter's wrapped units); a script's
own, and a callback's, were neither checked against the budget nor, outside ``train()``, written to the run folder
(a held-out user: an evaluation after ``train()`` took the ledger to 123 % of its budget while ``summary.json``
said "within the budget", one before it ran 120 % of its budget before ``train()`` refused, and one a callback asked
for at every step took a run to 130 %).

Before an evaluation runs, its bound (:meth:`~flopplan.engines.trl_meter.TRLMeter.evaluation_bound` over the rows
and longest prompts of the data it evaluates) is checked against what the budget leaves:

- Outside ``train()`` it must fit, else it is refused with one line and nothing runs. Once it has run, its line
  joins the run folder's logs, a finished run's summary is written again with it, and the ledger in the checkpoint
  at the trainer's step is saved again with it, so a resume from that checkpoint does not charge it as lost work.
- Inside ``train()`` it must fit with what training has admitted after it: the round in progress or next (its
  bound) and the evaluation the guard keeps for that round's end (none where training stops here). An evaluation
  the guard reserved fits by the guard's own decision. One it did not reserve (a callback's) runs where all of it
  fits; where only the evaluation fits, it runs and the guard decides again on what is left (stopping training, with
  its checkpoint, where the round no longer fits); where the evaluation does not fit, it does not run
  (``evaluate`` returns no metrics; the training loop's own call, ``Trainer._evaluate``, returns them before it
  would step a metric-driven LR scheduler on them) and training stops on the budget, with its checkpoint.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import torch

from flopplan.engines.trl_boundaries import evaluation_at_next_boundary
from flopplan.engines.trl_prompts import eval_datasets, longest_prompts
from flopplan.errors import UserError
from flopplan.runfile import last_complete_checkpoint


def evaluation_rows(trainer: Any, generations: int | None, datasets: list[Any] | None = None) -> tuple[int, int]:
    """An evaluation's rows over all processes (the dataloader's even batches round up; a dict of evaluation
    datasets, each in its own loop) and a process's batch; ``datasets``: those evaluated (default: the trainer's)."""
    if generations is None:
        return 0, 1
    batch, world = int(trainer.args.per_device_eval_batch_size), int(trainer.accelerator.num_processes)
    datasets = eval_datasets(trainer) if datasets is None else datasets
    return sum(-(-len(d) * generations // (batch * world)) * batch * world for d in datasets), batch


def _evaluated(trainer: Any, eval_dataset: Any) -> list[Any] | None:
    """The datasets ``trainer.evaluate(eval_dataset)`` evaluates (a name: one of the trainer's dict of them, as
    transformers' ``evaluate`` reads it); None: the trainer's own."""
    if eval_dataset is None:
        return None
    if isinstance(eval_dataset, str):
        return [trainer.eval_dataset[eval_dataset]]
    return list(eval_dataset.values()) if isinstance(eval_dataset, dict) else [eval_dataset]


class EvaluationGuard:
    """The wrapper of ``trainer.evaluate`` (see the module); ``callback``: the meter's FlopBudgetCallback, which
    knows whether ``train()`` is running and what the guard keeps for the next round's end; ``step_log``: rank 0's
    StepLog (None elsewhere, or without a run folder)."""

    def __init__(self, trainer: Any, meter: Any, callback: Any, step_log: Any) -> None:
        self.trainer, self.meter, self.callback, self.step_log = trainer, meter, callback, step_log
        self.depth = 0  # evaluate calls itself once per dataset of a dict: the outer call is the one guarded
        self.bounds: dict[tuple[int, ...], int] = {}

    def bound(self, datasets: list[Any] | None) -> int:
        """One evaluation's bound over ``datasets`` (None: the trainer's own, which training reserves)."""
        meter = self.meter
        if datasets is None and meter.eval_rows:
            return int(meter.evaluation_bound())
        datasets = eval_datasets(self.trainer) if datasets is None else datasets
        key = tuple(map(id, datasets))
        if key not in self.bounds:  # (read once per dataset: the prompts are tokenized to find the longest)
            from datasets import IterableDataset

            if any(isinstance(d, IterableDataset) for d in datasets):
                raise UserError("trainer.evaluate on an IterableDataset (streamed): the meter bounds an evaluation by "
                                "its data's longest prompt, read before it runs; give it a Dataset")
            rows, _ = evaluation_rows(self.trainer, int(self.trainer.num_generations_eval), datasets)
            _, _, prompt, reward = longest_prompts(self.trainer, {"train_dataset": [], "eval_dataset": [
                list(d["prompt"]) for d in datasets]})
            self.bounds[key] = int(meter.evaluation_bound(rows, (prompt, reward)))
        return self.bounds[key]

    def wrap_loop_call(self, loop_evaluate: Any) -> Any:
        """Wrap ``Trainer._evaluate``, the training loop's call of ``evaluate``: one the guard does not admit returns
        no metrics without calling ``evaluate``, so transformers does not step a ``ReduceLROnPlateau`` or
        ``GreedyLR`` scheduler on metrics that were never computed (a ``KeyError`` at the budget's stop, where the
        ``{}`` of a skipped ``evaluate`` reached it)."""
        @functools.wraps(loop_evaluate)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self.callback.training and not self.depth and not self.admit(self.bound(None)):
                return {}
            return loop_evaluate(*args, **kwargs)

        return guarded

    def wrap(self, evaluate: Any) -> Any:
        @functools.wraps(evaluate)
        def guarded(eval_dataset: Any = None, *args: Any, **kwargs: Any) -> Any:
            if self.depth:
                return evaluate(eval_dataset, *args, **kwargs)
            bound = self.bound(_evaluated(self.trainer, eval_dataset))
            training = self.callback.training
            if not training:
                self.refuse_outside(bound)
            elif not self.admit(bound):
                return {}
            self.depth += 1
            try:
                result = evaluate(eval_dataset, *args, **kwargs)
            finally:
                self.depth -= 1
            if training:
                self.decide_after()
            else:
                self.record_outside()
            return result

        return guarded

    # -- outside train() --------------------------------------------------------------------------------------
    def refuse_outside(self, bound: int) -> None:
        ledger = self.meter.ledger
        if not ledger.fits(bound):
            raise UserError(f"trainer.evaluate() could cost up to {bound:,} FLOPs and the budget leaves "
                            f"{ledger.remaining:,}: refused, nothing ran (the run folder is as it was)")

    def record_outside(self) -> None:
        """The evaluation that ran outside ``train()`` into the run folder (rank 0): its line; a finished run's
        summary again; the ledger in the checkpoint at the trainer's step again, with it."""
        trainer, meter, folder = self.trainer, self.meter, self.meter.folder
        if folder is None or self.step_log is None:
            return
        relock = meter.owns_folder and not folder.locked  # (train() unlocked it at its end)
        if relock:
            folder.lock()
        try:
            self.step_log.flush()
            if self.callback.ended:
                folder.write_summary(meter.summary(**meter.summary_fields))
            step = trainer.state.global_step
            last = last_complete_checkpoint(trainer.args.output_dir) if step else None
            if last is not None and last.name == f"checkpoint-{step}":
                meter.save(Path(last))
        finally:
            if relock:
                folder.unlock()

    # -- inside train() ---------------------------------------------------------------------------------------
    def admitted(self) -> int:
        """What training runs after this point that the guard has admitted: the round in progress or next and the
        evaluation it keeps for that round's end (0 where training stops here)."""
        trainer, meter = self.trainer, self.meter
        state, control = trainer.state, trainer.control
        if control.should_training_stop or state.global_step >= state.max_steps:
            return 0
        after = 0
        if meter.eval_rows:  # (FlopPoints: the next boundary may evaluate, as the guard counts it)
            after = 1 if meter.boundary_evaluation is not None else evaluation_at_next_boundary(
                trainer.args, state.global_step, meter.run.optimizer_steps_per_round, state.max_steps)
        return int(meter.next_round_bound() + after * meter.evaluation_bound())

    def in_flight(self) -> int:
        """The bound of the round that has run units not yet committed (0: none): an evaluation a callback runs
        from ``on_step_end`` comes before the meter's own callback commits the round (callbacks given to
        ``GRPOTrainer`` run first), and the ledger does not hold that round yet (a re-check: 109 % of a budget)."""
        return int(self.meter.next_round_bound()) if self.meter.local_charges() else 0

    def admit(self, bound: int) -> bool:
        """Whether the evaluation runs: where it does not fit what the budget leaves after the round in flight (at
        its bound, as the guard admitted it), it does not run and training stops on it (on the budget; at
        ``max_steps``, where the run ends anyway, on its steps, a note naming the evaluation not run)."""
        ledger, flight = self.meter.ledger, self.in_flight()
        if ledger.fits(bound + flight):
            return True
        step, last = self.trainer.state.global_step, self.trainer.state.max_steps
        after = f" after the round in flight (up to {flight:,})" if flight else ""
        if step < last:  # (at max_steps the run ends on its steps whatever the evaluation: its stop says so)
            self.meter.guard.decide(bound + flight, f"the evaluation at optimizer step {step} (not run){after}")
        self.meter.notes.append(f"the evaluation asked for at optimizer step {step} could cost up to {bound:,} FLOPs "
                                f"and the budget left {ledger.remaining:,}{after}: it did not run")
        self.stop()
        return False

    def decide_after(self) -> None:
        """After an evaluation inside ``train()``: where what training admitted no longer fits (an evaluation the
        guard did not reserve), training stops on the budget, with its checkpoint. A Ctrl-C that reached any process
        during an evaluation at a round's end (after the meter's callback decided to go on) stops training there,
        with that round's checkpoint: it ran one more round. Every process evaluates, so all decide alike."""
        admitted, step = self.admitted(), self.trainer.state.global_step
        if admitted and not self.meter.ledger.fits(admitted):
            self.meter.guard.decide(admitted, f"round {self.meter.guard.next_round} (with the evaluation at its end "
                                              f"where due), after an unreserved evaluation at optimizer step {step},")
            self.stop()
        callback = self.callback
        if callback.stopped or not step or step % self.meter.run.optimizer_steps_per_round:
            return
        if int(callback.reduce(torch.tensor([int(callback.ctrl_c.requested)]))[0]):
            callback.ctrl_c_anywhere = True
            if step < self.trainer.state.max_steps:
                self.meter.guard.stop("interrupted", f"interrupted after round {self.meter.rounds} (optimizer step "
                                      f"{step}, during its evaluation), with a checkpoint")
            self.stop()

    def stop(self) -> None:
        control = self.trainer.control
        control.should_training_stop = control.should_save = self.callback.stopped = True


def guard_evaluations(trainer: Any, meter: Any, callback: Any, step_log: Any) -> EvaluationGuard:
    """Wrap ``trainer.evaluate`` with the guard (see the module)."""
    guard = EvaluationGuard(trainer, meter, callback, step_log)
    trainer.evaluate = guard.wrap(trainer.evaluate)
    trainer._evaluate = guard.wrap_loop_call(trainer._evaluate)
    return guard


__all__ = ["EvaluationGuard", "evaluation_rows", "guard_evaluations"]
