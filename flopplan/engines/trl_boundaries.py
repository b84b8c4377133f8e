"""Where a metered TRL run's rounds meet TRL's checkpoints and evaluations: both must fall on a round's boundary
(:func:`check_boundaries`), and the budget guard keeps in reserve the evaluations that will run before its next
decision (:func:`evaluations_before_next_round`)."""

from __future__ import annotations

import math
from typing import Any

from flopplan.errors import UserError


def interval(steps: float, max_steps: int | None) -> int | None:
    """An ``eval_steps`` or ``save_steps`` in optimizer steps as transformers reads it: a value below 1 is a share
    of the run, ``math.ceil(max_steps * share)`` steps (``TrainerState.compute_steps``, transformers 5.25
    ``trainer_callback.py:166``, at ``train()``'s start); None where that share's run length is not known yet
    (``max_steps`` None: TRL's epochs decide it)."""
    if steps >= 1:
        return int(steps)
    return None if max_steps is None else math.ceil(max_steps * steps)


def check_boundaries(args: Any, per_round: int, evaluation: bool, max_steps: int | None = None) -> None:
    """Checkpoints and evaluations at round boundaries: a checkpoint inside a round cannot be resumed without
    losing its rollouts, and the guard keeps evaluations in reserve at the boundaries. ``max_steps``: the run's
    optimizer steps, which a share resolves against (None: not known before ``train()``, where the meter checks
    again with TRL's count)."""
    for name, strategy, steps in (("save_steps", args.save_strategy, args.save_steps),
                                  ("eval_steps", args.eval_strategy if evaluation else "no",
                                   args.eval_steps or args.logging_steps)):
        if strategy != "steps":  # (transformers' str enums: str() of SaveStrategy.STEPS is "SaveStrategy.STEPS",
            continue  # which missed these checks; == compares the values)
        every = interval(steps, max_steps) if steps > 0 else 0
        if every is not None and (every < 1 or every % per_round):
            share = f"{steps} of {max_steps} optimizer steps: {every}" if every != steps else f"{steps}"
            raise UserError(f"GRPOConfig {name} ({share}) must be a multiple of the {per_round} optimizer steps a "
                            "round takes")


def evaluation_at_next_boundary(args: Any, global_step: int, per_round: int, max_steps: int | None) -> int:
    """Whether (1) or not (0) an evaluation runs at the end of the round after optimizer step ``global_step``:
    where ``eval_steps`` makes it due, or where the run ends in or at the end of that round (transformers evaluates
    at ``max_steps`` whatever ``eval_steps`` says; ``max_steps`` None: not known yet, so counted); at every epoch's
    end, and where a share of a run of unknown length gives no steps yet."""
    every = interval(args.eval_steps or args.logging_steps, max_steps)
    if args.eval_strategy == "epoch" or every is None:
        return 1
    following = global_step + per_round
    return int(following % every == 0 or max_steps is None or following >= max_steps)


def evaluations_before_next_round(args: Any, global_step: int, per_round: int, max_steps: int | None) -> int:
    """Evaluations to keep in reserve when deciding, at optimizer step ``global_step``, about the next round of
    ``per_round`` steps: this boundary's, which runs after ``on_step_end`` where ``eval_steps`` makes it due, and
    the next round's end's (:func:`evaluation_at_next_boundary`; it runs even when the guard stops the run there).
    Both at epoch ends, and where ``eval_steps`` is a share of a run whose length is not known yet."""
    every = interval(args.eval_steps or args.logging_steps, max_steps)
    here = 1 if args.eval_strategy == "epoch" or every is None else int(global_step % every == 0)
    return here + evaluation_at_next_boundary(args, global_step, per_round, max_steps)


__all__ = ["check_boundaries", "evaluation_at_next_boundary", "evaluations_before_next_round", "interval"]
