"""Evaluations of a run: when one is due, what it costs at worst, and running it over the evaluation targets.

An evaluation greedily decodes every prompt of every target (:mod:`flopplan.train.targets`), target by target, and
scores each completion 0/1 by the task's rule. It is due before the first step (the baseline), after every
``eval_every``-th step, and after the first step at which the training FLOPs (rollout + learning + feedback, what
the ledger charged outside the evaluation bucket) reach each of ``eval_at_flops``. Its FLOPs go to the ledger's
evaluation bucket; the budget guard adds its worst case to the next step's whenever it may be due after that step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flopplan.grpo import phases as P
from flopplan.grpo.codecs import Codec
from flopplan.grpo.rewards import rule_rewards
from flopplan.grpo.tasks import Problem
from flopplan.ledger import PhaseCharge
from flopplan.passes import BUCKET_OF
from flopplan.runfile import EvalRecord
from flopplan.train.targets import target_evaluation_flops


@dataclass(frozen=True)
class EvalSchedule:
    """When evaluations run after a step: every ``every`` steps, and once per threshold of ``at_flops`` (training
    FLOPs), after the first step that reaches it. The baseline before step 1 is the trainer's."""

    every: int | None
    at_flops: tuple[int, ...] = ()

    def due(self, step: int, train_before: int, train_after: int) -> bool:
        """After ``step``, which took the training FLOPs from ``train_before`` to ``train_after``."""
        periodic = self.every is not None and step % self.every == 0
        return periodic or any(train_before < f <= train_after for f in self.at_flops)

    def may_be_due(self, step: int, train_now: int, step_worst: int) -> bool:
        """Whether an evaluation may follow ``step`` if it costs up to ``step_worst`` FLOPs (the guard's view)."""
        return self.due(step, train_now, train_now + step_worst)


def charges_training_flops(charges: Sequence[PhaseCharge]) -> int:
    """Training FLOPs (outside the evaluation bucket) of a step's charges so far."""
    return sum(v for c in charges for phase, v in c.executed.items() if BUCKET_OF[phase] != "evaluation")


@dataclass(frozen=True)
class TargetScores:
    """One target of one evaluation: a 0/1 score per prompt, in the target's fixed order."""

    target: str
    scores: tuple[int, ...]

    @property
    def accuracy(self) -> float:
        return float(np.mean(self.scores)) if self.scores else 0.0

    def record(self, step: int, train_flops: int, flops: int) -> EvalRecord:
        return EvalRecord(step, self.target, train_flops, flops, self.accuracy, self.scores)


def evaluation_metrics(results: Sequence[TargetScores]) -> dict[str, float]:
    """The metrics line's view of an evaluation: ``eval_accuracy`` is the first target's; with several targets
    each also as ``eval_accuracy_<target>``."""
    if not results:
        return {}
    metrics = {"eval_accuracy": results[0].accuracy}
    if len(results) > 1:
        metrics.update({f"eval_accuracy_{r.target}": r.accuracy for r in results})
    return metrics


def worst_case_evaluation(recipe: Any, codec: Codec, targets: dict[str, list[Problem]]) -> int:
    """The guard's price of one evaluation: every target, every completion at the evaluation's maximum length
    (:func:`flopplan.train.targets.target_evaluation_flops`, with the policy's own prompt tokens)."""
    return sum(target_evaluation_flops(recipe, [len(codec.prompt_ids(p)) for p in problems])
               for problems in targets.values())


def evaluate_targets(model: Any, codec: Codec, targets: dict[str, list[Problem]], *, ctx: P.PhaseContext,
                     charge_as: tuple[Any, ...], batch: int, max_new_tokens: int,
                     on_charges: Callable[[list[PhaseCharge]], None] = lambda _: None,
                     ) -> tuple[list[TargetScores], list[PhaseCharge]]:
    """Greedy completions of every target's prompts, scored by the rule; ``on_charges`` sees each target's
    generate calls as soon as they ran (the trainer logs them as work in progress); ``charge_as``: the round's
    ``eval.prefill`` and ``eval.decode`` passes."""
    results: list[TargetScores] = []
    charges: list[PhaseCharge] = []
    for name, problems in targets.items():
        prompts = [codec.prompt_ids(p) for p in problems]
        rollouts, done = P.generate(model, codec, prompts, ctx=ctx, charge_as=charge_as, batch=batch,
                                    max_new_tokens=max_new_tokens, greedy=True)
        ended = [bool(c) and c[-1] == codec.eos_id for c in rollouts.completion_ids]
        _, correct = rule_rewards(rollouts.completions, [p.answer for p in problems], ended)
        results.append(TargetScores(name, tuple(int(c) for c in correct)))
        charges += done
        on_charges(done)
    return results, charges
