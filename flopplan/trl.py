"""Meter a TRL GRPO script: ``from flopplan.trl import meter``, then ``meter(trainer, budget=..., out=...)`` before
``trainer.train()``. The implementation lives in :mod:`flopplan.engines.trl_hook`; importing this module imports
neither torch nor TRL."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flopplan.engines.trl_meter import TRLMeter
    from flopplan.recipe import Recipe

__all__ = ["meter"]


def meter(trainer: Any, *, budget: Any = None, out: str | Path | None = None, profile: Any = None,
          price_per_hour: float | None = None, recipe: Recipe | None = None, measure: bool = False,
          peak_flops: float | None = None, resume: bool = False, lost_outside_budget: bool = False) -> TRLMeter:
    """Attach flopplan's FLOP meter and budget guard to a ``trl.GRPOTrainer`` (or a subclass), before
    ``trainer.train()``.

    The recipe is read from the trainer: its ``GRPOConfig``, the policy (peft LoRA rank, targets and layers;
    gradient checkpointing; attention implementation; dtype), the reference model, the reward functions (Python
    callables cost nothing; an ``nn.Module`` is a reward model, charged), the number of processes and the rank.
    What flopplan cannot price is refused here with a one-line :class:`~flopplan.errors.UserError` naming the
    field, before anything runs or is written.

    Args:
        trainer: the ``GRPOTrainer`` the script built. Its methods are wrapped on the instance, so a subclass's
            overrides keep working.
        budget: FLOPs (a number), or a :class:`flopplan.budget.Budget` in FLOPs, GPU-hours or dollars (the latter
            two need ``profile``, and dollars a price: converted as ``flopplan plan`` does). Training stops before
            a round (and an evaluation, when evaluating) that might not fit; the final checkpoint is saved.
        out: a run folder, written as ``flopplan train`` writes one (``config.json``, ``ledger.jsonl``,
            ``metrics.jsonl``, ``summary.json``), which ``flopplan report`` reads. A new or empty folder unless
            ``resume``.
        profile: a hardware profile (a datasheet name such as ``h100``, a calibrated profile file, or a
            :class:`flopplan.hardware.Profile`), for a budget in GPU-hours or dollars.
        price_per_hour: dollars per GPU-hour (a dollar budget).
        recipe: an explicit :class:`flopplan.recipe.Recipe` to check against the trainer: refused, naming the
            first field that differs, when it does not describe what the trainer runs.
        measure: also count every unit with torch's FlopCounterMode (plus its named blind spots) and compare.
        peak_flops: the device's peak FLOP/s, for the ``flops/mfu`` metric.
        resume: continue the run in ``out``, which it needs (call ``trainer.train(resume_from_checkpoint=...)``):
            the ledger saved with the checkpoint is continued; the work a kill lost after that checkpoint (the run
            folder's logs of committed rounds and of the units of the round in progress) is recorded as
            ``lost_flops``.
        lost_outside_budget: lost work is recorded but not charged to the budget, so a resumed run does the rounds
            an uninterrupted one does (RACE's pilots run so); by default it is charged.

    Ctrl-C: ``trainer.train()`` is wrapped so that the first SIGINT lets the round in progress finish; TRL then
    saves a checkpoint at its boundary (every process stops on the same round), the summary records the stop as
    ``interrupted``, and ``train()`` raises ``KeyboardInterrupt``. Resumed from that checkpoint, nothing is lost. A
    second SIGINT more than a second later stops it at once. In the round where the run ends anyway (budget,
    ``max_steps``) the run's own stop reason stays, and ``train()`` still raises. Under ``torchrun`` the launcher
    kills its workers ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT`` seconds (30) after passing the signal on.

    Returns:
        The meter: ``.ledger`` (a :class:`flopplan.ledger.Ledger`: FLOPs by phase and bucket), ``.decision`` (a
        :class:`flopplan.guard.StopDecision`), ``.summary()`` (a :class:`flopplan.runfile.RunSummary`),
        ``.recipe`` and ``.notes``.
    """
    from flopplan.engines.trl_hook import meter as attach

    return attach(trainer, budget=budget, out=out, profile=profile, price_per_hour=price_per_hour, recipe=recipe,
                  measure=measure, peak_flops=peak_flops, resume=resume,
                  lost_outside_budget=lost_outside_budget)
