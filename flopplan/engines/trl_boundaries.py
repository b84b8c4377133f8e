"""Where a metered TRL run's rounds meet TRL's checkpoints and evaluations: both must fall on a round's boundary
(:func:`check_boundaries`), and the budget guard keeps in reserve the evaluations that will run before its next
decision (:func:`evaluations_before_next_round`)."""

from __future__ import annotations

from typing import Any

from flopplan.errors import UserError


def check_boundaries(args: Any, per_round: int, evaluation: bool) -> None:
    """Checkpoints and evaluations at round boundaries: a checkpoint inside a round cannot be resumed without
    losing its rollouts, and the guard keeps evaluations in reserve at the boundaries."""
    for name, strategy, steps in (("save_steps", args.save_strategy, args.save_steps),
                                  ("eval_steps", args.eval_strategy if evaluation else "no",
                                   args.eval_steps or args.logging_steps)):
        if strategy == "steps" and (steps < 1 or int(steps) % per_round):  # (transformers' str enums: str() of
            # SaveStrategy.STEPS is "SaveStrategy.STEPS", which missed these checks; == compares the values)
            raise UserError(f"GRPOConfig {name} ({steps}) must be a multiple of the {per_round} optimizer steps a "
                            "round takes")


def evaluations_before_next_round(args: Any, global_step: int, per_round: int, max_steps: int | None) -> int:
    """Evaluations to keep in reserve when deciding, at optimizer step ``global_step``, about the next round of
    ``per_round`` steps: this boundary's, which runs after ``on_step_end``, and the next round's end's (it runs even
    when the guard stops the run there), each where ``eval_steps`` makes it due, or, for the next, where the run
    ends in or at the end of that round (transformers evaluates at ``max_steps`` whatever ``eval_steps`` says;
    ``max_steps`` None: not known yet, so counted). Both at epoch ends, and where ``eval_steps`` is a share of the
    run's steps."""
    if args.eval_strategy == "epoch":
        return 2
    steps = args.eval_steps or args.logging_steps
    if steps < 1:
        return 2
    following = global_step + per_round
    last = max_steps is None or following >= max_steps
    return int(global_step % int(steps) == 0) + int(following % int(steps) == 0 or last)


__all__ = ["check_boundaries", "evaluations_before_next_round"]
