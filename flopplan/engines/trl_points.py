"""Evaluation at FLOP points through TRL's own evaluation loop, for a metered GRPOTrainer (a RACE pilot that is the
user's script: :meth:`flopplan.race.script.PilotSpec.meter`).

TRL's ``eval_strategy="steps"`` with ``eval_steps`` one round asks for an evaluation at every round boundary;
:class:`FlopPoints` (a callback after the meter's) keeps only those after the first round whose training FLOPs (the
ledger without the evaluation bucket) reach each point, and the one after the last round (the meter stopped
training, or TRL's ``max_steps`` did). Each evaluation is metered by the meter (its own bucket; at each boundary the
guard keeps in reserve the worst case of the evaluations that will run: the next round's, and this boundary's where
a point was reached) and scored per evaluation prompt: the rewards TRL's ``_calculate_rewards`` returns while
evaluating (gathered over processes) are read for one reward function, each prompt scores 1 when the mean over its
completions reaches ``correct``, and rank 0 appends one :class:`~flopplan.runfile.EvalRecord` line to the run
folder's ``evaluations.jsonl``, the prompts in the ``eval_dataset``'s order (TRL shuffles them by seed; pilots pair
prompt by prompt). A kill drops the line with the rounds after the checkpoint, as the meter trims its logs.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from transformers import TrainerCallback

from flopplan.errors import UserError
from flopplan.runfile import EVALUATIONS, EvalRecord


def _key(prompt: Any) -> str:
    return json.dumps(prompt, sort_keys=True, default=str)


def evaluate_at_points(trainer: Any, meter: Any, points: Sequence[int], target: str, *, score: str | None = None,
                       correct: float = 1.0) -> FlopPoints:
    """Evaluate ``trainer`` (metered by ``meter``) at step 0 (``eval_on_start``), after the first round whose
    training FLOPs reach each of ``points``, and after its last round, as target ``target`` (see the module)."""
    names = list(trainer.reward_func_names)
    if score is not None and score not in names:
        raise UserError(f"score={score!r} is not one of the trainer's reward functions ({', '.join(names)})")
    column = names.index(score) if score is not None else 0
    callback = FlopPoints(trainer, meter, tuple(sorted(points)), target, column, correct)
    calculate = trainer._calculate_rewards

    @functools.wraps(calculate)
    def calculate_rewards(inputs: Any, *args: Any, **kwargs: Any) -> Any:
        rewards = calculate(inputs, *args, **kwargs)
        if not trainer.model.training:
            callback.record([_key(row["prompt"]) for row in inputs], rewards[:, column].tolist())
        return rewards

    trainer._calculate_rewards = calculate_rewards
    trainer.add_callback(callback)
    meter.boundary_evaluation = callback.due  # the guard keeps in reserve only the evaluations that will run
    return callback


class FlopPoints(TrainerCallback):
    """Which round boundaries evaluate (see the module), and the scores of each evaluation."""

    def __init__(self, trainer: Any, meter: Any, points: tuple[int, ...], target: str, column: int,
                 correct: float) -> None:
        self.trainer, self.meter, self.points, self.target = trainer, meter, points, target
        self.column, self.correct = column, correct
        self.reached = 0  # training FLOPs at the last round boundary
        self.rewards: dict[str, list[float]] = {}

    def record(self, keys: list[str], rewards: list[float]) -> None:
        """One evaluation batch: ``rewards`` are gathered over processes, ``keys`` this process's prompts."""
        accelerator = self.trainer.accelerator
        if accelerator.num_processes > 1:
            from accelerate.utils import gather_object

            keys = gather_object(keys)
        for key, reward in zip(keys, rewards, strict=True):
            self.rewards.setdefault(key, []).append(float(reward))

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self.reached = self.meter.ledger.training_flops  # resumed: the ledger the meter loaded
        return control

    def due(self) -> bool:
        """Whether a point was reached since the last round boundary: the evaluation at this boundary runs (asked
        by the meter's guard, after the round's commit and before this callback's :meth:`on_step_end`)."""
        return any(self.reached < point <= self.meter.ledger.training_flops for point in self.points)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step % self.meter.run.optimizer_steps_per_round:
            return control
        due = self.due()
        self.reached = self.meter.ledger.training_flops
        # the last evaluation of a run that ends here; not of one Ctrl-C stops (it goes on when resumed, as an
        # uninterrupted run would, with the evaluations at its points)
        ending = control.should_training_stop and self.meter.decision.reason != "interrupted"
        control.should_evaluate = bool(due or ending)
        return control

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        rewards, self.rewards = self.rewards, {}
        folder = self.meter.folder
        if folder is None or not state.is_world_process_zero:
            return control
        scores = []
        for prompt in self.trainer.eval_dataset["prompt"]:
            seen = rewards.get(_key(prompt))
            if not seen:
                raise UserError("an evaluation prompt was not scored by TRL's evaluation loop (check "
                                "dataloader_drop_last and the reward functions' output)")
            scores.append(1 if sum(seen) / len(seen) >= self.correct else 0)
        ledger = self.meter.ledger
        record = EvalRecord(self.meter.rounds, self.target, ledger.training_flops, ledger.spent,
                            sum(scores) / len(scores), tuple(scores))
        with open(folder.path / EVALUATIONS, "a") as handle:
            handle.write(json.dumps(record.to_data()) + "\n")
        return control
