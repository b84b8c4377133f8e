"""Evaluation targets: the fixed prompt sets a run is evaluated on, and the exact price of one evaluation (torch-free).

A target is a named, fixed list of held-out problems, the same for every run of a task whatever its seed, policy,
group size or reward system, so that RACE pairs scores prompt by prompt across arms and seeds:

* ``heldout``: the built-in task's held-out strings (split off the training strings with the fixed
  :data:`EVAL_SEED`: never trained on), or a dataset run's ``--eval-dataset``;
* ``long``: the same rule on strings :data:`LONG_FACTOR` times as long (8 digits when training on 4): a variant no
  training prompt has, the target RACE keeps out of every fit.

Each target holds ``eval_prompts`` problems (the recipe's); an evaluation greedily decodes all of them, target by
target, in calls of ``eval_batch`` prompts. :func:`evaluation_flops` prices one evaluation exactly as the run's
budget guard does (every completion at the evaluation's maximum length), so a designer can reserve the budget of
N evaluations before any run.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from flopplan.cost import worst_case_round
from flopplan.errors import UserError
from flopplan.grpo.data import load_problems
from flopplan.grpo.tasks import DigitTask, Problem, parse_task
from flopplan.recipe import Recipe

EVAL_TARGETS = ("heldout", "long")
EVAL_SEED = 0
"""The seed of the held-out split and of the long strings: fixed, so that every run of a task is evaluated on the
same prompts (with seed 0 a run's training and held-out strings are those it had when the split took the run's
seed)."""
LONG_FACTOR = 2
DEFAULT_TRAIN_SIZE = 20000


def parse_targets(text: str | Sequence[str]) -> tuple[str, ...]:
    """``heldout,long`` (or a sequence of names) -> the names, in order, each once; unknown names refused."""
    names = [n.strip() for n in text.split(",")] if isinstance(text, str) else [str(n).strip() for n in text]
    names = [n for n in names if n]
    unknown = [n for n in names if n not in EVAL_TARGETS]
    if unknown:
        raise UserError(f"unknown evaluation target {unknown[0]!r}: use {', '.join(EVAL_TARGETS)}")
    if not names:
        raise UserError(f"give at least one evaluation target ({', '.join(EVAL_TARGETS)})")
    if len(set(names)) != len(names):
        raise UserError(f"evaluation targets repeat: {','.join(names)}")
    return tuple(names)


def long_task(task: DigitTask) -> DigitTask:
    """The ``long`` variant of a digits task: the same rule on strings :data:`LONG_FACTOR` times as long."""
    length = LONG_FACTOR * task.length
    if length > 32:
        raise UserError(f"the digits task of length {task.length} has no long variant (at most 32 digits, not "
                        f"{length}): train on at most 16 digits, or evaluate on heldout only")
    return DigitTask(task.rule, length)


def task_split(task: str, train_size: int, eval_prompts: int) -> tuple[list[Problem], list[Problem]]:
    """The training problems and the ``heldout`` problems of a built-in task (the fixed split of
    :data:`EVAL_SEED`; the training order is shuffled by each run's own seed)."""
    return parse_task(task).split(train_size, eval_prompts, seed=EVAL_SEED)


def long_problems(task: DigitTask, n: int) -> list[Problem]:
    """``n`` distinct strings of the long variant (with :data:`EVAL_SEED`), none of them a training string."""
    variant = long_task(task)
    space = 10 ** variant.length
    if n > space:
        raise UserError(f"the long digits target of length {variant.length} has only {space:,} problems, not {n:,}")
    rng = random.Random(EVAL_SEED * 1_000_003 + variant.length)
    drawn: dict[int, None] = {}
    while len(drawn) < n:  # 10^8 and more strings: rejection sampling draws each almost once
        drawn.setdefault(rng.randrange(space))
    return [Problem(" ".join(str(n).zfill(variant.length)) + " >",
                    variant.answer([int(c) for c in str(n).zfill(variant.length)])) for n in drawn]


def target_problems(targets: Sequence[str], eval_prompts: int, *, task: str | None = "digits",
                    train_size: int = DEFAULT_TRAIN_SIZE, dataset: str | None = None,
                    eval_dataset: str | None = None,
                    load: Callable[[str], list[Problem]] = load_problems) -> dict[str, list[Problem]]:
    """The problems of each target, in their fixed order (``eval_prompts`` each). A dataset run has one target,
    ``heldout``: its eval dataset's first ``eval_prompts`` problems (read by ``load``: the run's chat template and
    system prompt)."""
    out: dict[str, list[Problem]] = {}
    for name in parse_targets(targets):
        if dataset is not None:
            if name != "heldout":
                raise UserError(f"evaluation target {name!r} is a variant of the built-in task; a dataset run is "
                                "evaluated on heldout (its --eval-dataset)")
            problems = load(eval_dataset) if eval_dataset else []
        elif task is None:  # (a dataset run's)
            raise ValueError("a run without a dataset has a built-in task")
        elif name == "heldout":
            problems = task_split(task, train_size, eval_prompts)[1]
        else:
            problems = long_problems(parse_task(task), eval_prompts)
        check_eval_set(eval_prompts, len(problems), given=not (dataset and not eval_dataset))
        out[name] = problems[:eval_prompts]
    return out


def check_eval_set(asked: int, has: int, given: bool) -> None:
    """Refuse an evaluation of ``asked`` prompts from a set of ``has`` in one line naming what to give: an
    ``--eval-dataset`` (``given`` False: a dataset run without one), else fewer ``--eval-prompts``."""
    if has < asked:
        hint = " (give --eval-dataset FILE, or --no-eval)" if not given else \
            f" (give --eval-prompts {has} or fewer)" if has else ""
        raise UserError(f"eval_prompts {asked} but the eval set has {has} problems{hint}")


def builtin_encode(text: str) -> list[int]:
    """Prompt ids as the built-in policies read them (the character tokenizer, with BOS)."""
    from flopplan.grpo.tokenizer import CharTokenizer

    return CharTokenizer().encode(text, bos=True)


def target_evaluation_flops(recipe: Recipe, prompt_tokens: Sequence[int], completion_max: int | None = None) -> int:
    """The worst case of evaluating one target whose prompts have ``prompt_tokens`` tokens (in order): greedy
    generate in calls of ``eval_batch``, each left-padded to its longest prompt, every completion at
    ``completion_max`` (default: the recipe's evaluation maximum). The run's budget guard charges this."""
    if recipe.eval_every is None:
        raise UserError("the recipe has no evaluation (eval_every, eval_prompts)")
    return worst_case_round(recipe, None, recipe.completion_len.max, eval_prompt_tokens=list(prompt_tokens),
                            eval_completion_max=completion_max, round_phases=False, evaluation=True)


def evaluation_flops(recipe: Recipe, targets: Sequence[str] = ("heldout",), *, task: str = "digits",
                     train_size: int = DEFAULT_TRAIN_SIZE, dataset: str | None = None,
                     eval_dataset: str | None = None,
                     encode: Callable[[str], list[int]] | None = None) -> dict[str, int]:
    """FLOPs of one evaluation of ``targets``, target by target (exact integers; their sum is one evaluation):
    the worst case the run's budget guard reserves, every completion at the evaluation's maximum length.

    ``encode``: how the policy tokenizes a prompt (default: the built-in character tokenizer of the tiny family).
    A run with evaluations at its start, every ``eval_every`` steps and at N FLOP thresholds spends at most
    (1 + steps // eval_every + N) x the sum."""
    encode = encode or builtin_encode
    problems = target_problems(targets, recipe.eval_prompts, task=task, train_size=train_size, dataset=dataset,
                               eval_dataset=eval_dataset)
    return {name: target_evaluation_flops(recipe, [len(encode(p.prompt)) for p in items])
            for name, items in problems.items()}


__all__ = ["EVAL_SEED", "EVAL_TARGETS", "LONG_FACTOR", "evaluation_flops", "long_task", "parse_targets",
           "target_evaluation_flops", "target_problems", "task_split"]
