"""Reward functions as TRL calls them, for both engines of ``flopplan train`` (torch-free).

A reward function is a sync or ``async`` callable ``f(prompts, completions, completion_ids, **columns) ->
list[float | None]``, all arguments by keyword: ``prompts`` and ``completions`` are text, or chat messages for
a conversational dataset (a completion is then ``[{"role": "assistant", "content": ...}]``); every dataset column
but the prompt arrives as a keyword list (``answer``: the reference answer as :mod:`flopplan.grpo.data` reduces it);
TRL adds ``trainer_state``, ``log_extra`` and ``log_metric`` (the built-in trainer passes them as None). ``None``
skips that reward for the sample. Several functions are summed with their weights (TRL's ``reward_weights``;
default 1 each), a None counting 0, as TRL's ``nansum`` does.

``--reward-func`` names one: ``exact`` (exact match after normalisation, the default), ``math`` (math-verify's
parse and verify, the ``math`` extra), or ``module:function`` / ``path/to/file.py:function`` (the current folder
is importable, as with ``python -m``).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import inspect
import shlex
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopplan.errors import UserError, first_line
from flopplan.grpo.tasks import Problem, extract_answer, is_correct

BUILTIN_REWARDS = ("exact", "math")
FLOAT32_MAX = 3.4028234663852886e38
"""The largest float32: the rewards become a float32 tensor (a reward of 1e300 was infinite there)."""
TRL_KEYWORDS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")
"""What TRL's GRPOTrainer (1.16 ``_calculate_rewards``) passes every reward function besides the dataset columns."""


def completion_text(completion: Any) -> str:
    """A completion's text: itself, or the content of its last message (conversational data)."""
    return completion if isinstance(completion, str) else str(completion[-1]["content"])


def exact_match_reward(completions: list[Any], answer: list[str], **_: Any) -> list[float]:
    """1 when the completion's final answer (``\\boxed{}``, after ``####``, else its last number) equals the
    reference answer after normalisation, else 0."""
    return [float(is_correct(completion_text(c), a)) for c, a in zip(completions, answer, strict=True)]


def math_reward(completions: list[Any], answer: list[str], **_: Any) -> list[float | None]:
    """math-verify's verdict (1 or 0) on the completion against the reference answer, which are equal as
    mathematical objects (``0.5`` and ``\\frac{1}{2}``); None (skipped) when the reference does not parse. Its
    timeouts use ``signal.alarm``, so off the main thread they are off."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    extraction = [LatexExtractionConfig(), ExprExtractionConfig()]
    rewards: list[float | None] = []
    for completion, gold in zip(completions, answer, strict=True):
        expected = parse(gold, extraction_config=extraction, parsing_timeout=timeout)
        if not expected:
            rewards.append(None)
            continue
        found = parse(completion_text(completion), extraction_config=extraction, parsing_timeout=timeout)
        rewards.append(float(verify(expected, found, timeout_seconds=timeout)))
    return rewards


BUILTIN = {"exact": exact_match_reward, "math": math_reward}


def load_reward_func(spec: str) -> Callable[..., Any]:
    """The function a ``--reward-func`` names, its signature checked against TRL's call."""
    if spec in BUILTIN:
        if spec == "math" and importlib.util.find_spec("math_verify") is None:
            raise UserError("--reward-func math needs math-verify: pip install 'flopplan[math]'")
        return BUILTIN[spec]
    module_name, sep, name = spec.rpartition(":")
    if not sep or not module_name or not name.isidentifier():
        raise UserError(f"--reward-func {spec!r}: give {' or '.join(BUILTIN_REWARDS)}, MODULE:FUNCTION or "
                        "FILE.py:FUNCTION")
    try:
        module = _import(module_name)
    except UserError:
        raise
    except BaseException as exc:  # whatever the user's module raises while it imports
        raise UserError(f"--reward-func {spec!r}: cannot import {module_name}: {type(exc).__name__}: "
                        f"{first_line(exc)}") from None
    func = getattr(module, name, None)
    if func is None:
        raise UserError(f"--reward-func {spec!r}: {module_name} has no {name}")
    if not callable(func):
        raise UserError(f"--reward-func {spec!r}: {name} is a {type(func).__name__}, not a function")
    check_signature(spec, func, ())
    return func


def _import(module_name: str) -> Any:
    if module_name.endswith(".py") or "/" in module_name:
        path = Path(module_name)
        if not path.is_file():
            raise UserError(f"--reward-func: no file {module_name!r}")
        loader = importlib.util.spec_from_file_location(f"flopplan_rewards_{path.stem}", path)
        assert loader is not None and loader.loader is not None
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
        return module
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))  # the user's own modules beside the command, as python -m has them
    return importlib.import_module(module_name)


def _raised(spec: str, exc: BaseException) -> RewardFailed:
    """What a reward function raised during a run (an ``exit()`` included; a Ctrl-C is the trainer's, whose handler
    stops after the phase), as its one line."""
    return RewardFailed(f"reward function {spec!r} raised {type(exc).__name__}: {first_line(exc)}")


def _checked(spec: str, out: Any, n: int) -> list[float | None]:
    """:func:`_rewards` of what a reward function returned during a run, refused as a :class:`RewardFailed`."""
    try:
        return _rewards(spec, out, n)
    except UserError as exc:
        raise RewardFailed(str(exc)) from None


def _rewards(spec: str, out: Any, n: int) -> list[float | None]:
    """A reward function's output as TRL reads it: a list (or tuple, array, tensor) of ``n`` numbers or None
    (NumPy and 0-d torch numbers and booleans are numbers, as TRL's float32 tensor takes them). A scalar, None, a
    dict (whose keys were read as the rewards), a generator, or a number that is not finite is refused in one line
    (infinity made the loss NaN and the next step's sampling crash)."""
    if isinstance(out, (str, bytes, dict)) or not hasattr(out, "__len__") or not hasattr(out, "__iter__"):
        raise UserError(f"reward function {spec!r} returned {out!r:.80}: a list of {n} rewards (numbers or None)")
    values = list(out)
    if len(values) != n:
        raise UserError(f"reward function {spec!r} returned {len(values)} rewards for {n} completions")
    read: list[float | None] = []
    for v in values:
        number = v.item() if hasattr(v, "item") and getattr(v, "ndim", 0) == 0 else v  # NumPy, a 0-d tensor
        if number is not None and (isinstance(number, str) or not isinstance(number, (int, float))):
            raise UserError(f"reward function {spec!r} returned {v!r:.80}: rewards are numbers or None")
        if number is not None and abs(float(number)) > FLOAT32_MAX:  # (inf, or inf once read as float32)
            raise UserError(f"reward function {spec!r} returned {v!r}: rewards must be finite in float32 (NaN and "
                            "None count 0)")
        read.append(None if number is None else float(number))
    return read


def check_signature(spec: str, func: Callable[..., Any], columns: Sequence[str], data: str = "the dataset") -> None:
    """Refuse a function TRL's call (its keywords and ``columns``, by keyword) would fail on; with no columns
    (before the data is read) only the keywords TRL always passes are checked. ``data``: the dataset, in words."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return  # a builtin or C callable: nothing to check
    offered = {k: None for k in (*TRL_KEYWORDS, *columns)}
    try:
        if columns:
            signature.bind(**offered)
        else:
            signature.bind_partial(**offered)
    except TypeError as exc:
        takes = ", ".join(columns) if columns else "the dataset's columns"
        needed = [name for name, p in signature.parameters.items() if name not in offered and p.default is p.empty
                  and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        positional = [name for name, p in signature.parameters.items() if p.kind == p.POSITIONAL_ONLY]
        if positional:  # (TRL passes every argument by keyword)
            raise UserError(f"--reward-func {spec!r} takes {', '.join(map(repr, positional))} by position only, and "
                            "TRL passes every argument by keyword: drop the '/' from its signature") from None
        if columns and needed:  # a column the function reads that the data does not have: **kwargs would not help
            raise UserError(f"--reward-func {spec!r} needs {', '.join(map(repr, needed))}, which is neither a "
                            f"keyword TRL passes nor a column of {data} (its columns: {takes}): add the column "
                            "to the data, or give the argument a default") from None
        raise UserError(f"--reward-func {spec!r} does not take TRL's call f(prompts, completions, completion_ids, "
                        f"trainer_state, log_extra, log_metric, {takes}) by keyword ({exc}): add **kwargs") \
            from None


class RewardFailed(UserError):
    """A reward function raised, or returned what TRL would not read, during a step: the trainer abandons the step
    (its rewards come before the first update), writes a checkpoint, and says so in one line."""

    def abandoned(self, step: int, flops: int, out_dir: str, charged: bool = True) -> UserError:
        counted = "counted against the budget" if charged else "recorded, not charged (--lost-outside-budget)"
        return UserError(f"{self}: step {step} was abandoned ({flops:,} FLOPs, {counted}) and a "
                         "checkpoint written; fix the function and continue with flopplan train --out "
                         f"{shlex.quote(out_dir)} --resume")


@dataclass
class RewardFuncs:
    """The run's reward functions and their weights (TRL's ``reward_weights``)."""

    specs: tuple[str, ...]
    funcs: tuple[Callable[..., Any], ...]
    weights: tuple[float, ...]

    @staticmethod
    def load(specs: Sequence[str], weights: Sequence[float] | None = None) -> RewardFuncs:
        if not specs:
            raise UserError("give at least one reward function")
        if len(set(specs)) != len(specs):
            raise UserError("--reward-func: each function once")
        if weights is not None and len(weights) != len(specs):
            raise UserError(f"--reward-weights has {len(weights)} weights for {len(specs)} reward functions")
        return RewardFuncs(tuple(specs), tuple(load_reward_func(s) for s in specs),
                           tuple(float(w) for w in weights) if weights is not None else (1.0,) * len(specs))

    def check_columns(self, columns: Sequence[str], data: str = "the dataset") -> None:
        """Refuse a dataset column named as one of TRL's keywords (it replaced the prompts or completions the
        functions were given: a held-out user's ``completions`` column scored every completion right; TRL refuses
        it as a keyword given twice), then each function's signature."""
        clash = sorted(set(columns) & set(TRL_KEYWORDS))
        if clash:
            raise UserError(f"{data}'s column {clash[0]!r} is one of the keywords a reward function is called "
                            f"with ({', '.join(TRL_KEYWORDS)}): rename it")
        for spec, func in zip(self.specs, self.funcs, strict=True):
            check_signature(spec, func, columns, data)

    def score(self, prompts: list[Any], completions: list[Any], completion_ids: list[list[int]],
              columns: dict[str, list[Any]]) -> tuple[list[float], dict[str, list[float | None]]]:
        """The weighted sum of every function's rewards (None counting 0) and each function's rewards."""
        per_func: dict[str, list[float | None]] = {}
        for spec, func in zip(self.specs, self.funcs, strict=True):
            kwargs = {"prompts": prompts, "completions": completions, "completion_ids": completion_ids,
                      "trainer_state": None, "log_extra": None, "log_metric": None, **columns}
            try:
                out = func(**kwargs)
                if inspect.isawaitable(out):
                    out = asyncio.run(_awaited(out))
            except (Exception, SystemExit) as exc:
                raise _raised(spec, exc) from None
            per_func[spec] = _checked(spec, out, len(completions))
        total = [sum(w * (0.0 if v is None or v != v else v) for w, v in zip(self.weights, row, strict=True))
                 for row in zip(*per_func.values(), strict=True)]
        return total, per_func


    def guarded(self) -> list[Callable[..., Any]]:
        """The functions as TRL's GRPOTrainer calls them (``flopplan train --engine trl``), each raising
        :class:`RewardFailed` where it raises or returns what TRL would not read (:func:`_rewards`), its name and its
        being sync or ``async`` kept (TRL names its metrics by the one and awaits by the other)."""
        def guard(spec: str, func: Callable[..., Any]) -> Callable[..., Any]:
            def read(out: Any, kwargs: dict[str, Any]) -> Any:
                _checked(spec, out, len(kwargs.get("completions") or ()))
                return out

            if inspect.iscoroutinefunction(func):
                @functools.wraps(func)
                async def run_async(**kwargs: Any) -> Any:
                    try:
                        out = await func(**kwargs)
                    except (Exception, SystemExit) as exc:
                        raise _raised(spec, exc) from None
                    return read(out, kwargs)
                return run_async

            @functools.wraps(func)
            def run(**kwargs: Any) -> Any:
                try:
                    out = func(**kwargs)
                except (Exception, SystemExit) as exc:
                    raise _raised(spec, exc) from None
                return read(out, kwargs)
            return run

        return [guard(spec, func) for spec, func in zip(self.specs, self.funcs, strict=True)]

    def columns(self, problem: Problem) -> tuple[str, ...]:
        """The keyword columns a problem's row hands the reward functions."""
        return tuple(problem.columns) if problem.columns is not None else ("answer",)

    def score_problems(self, problems: list[Problem], completions: list[str], completion_ids: list[list[int]],
                       ) -> tuple[list[float], list[bool]]:
        """Rewards of completions of ``problems`` (one problem per completion), called as TRL calls them (a
        conversation's prompt and completion as messages), and whether each is correct: math-verify's verdict when
        ``math`` is among the functions, else exact match (the accuracy the run reports)."""
        chat = [p.messages is not None for p in problems]
        prompts = [list(p.messages) if p.messages is not None else p.prompt for p in problems]
        shown = [[{"role": "assistant", "content": c}] if conv else c for c, conv in zip(completions, chat,
                                                                                         strict=True)]
        names = self.columns(problems[0]) if problems else ()
        rows = [p.columns if p.columns is not None else {"answer": p.answer} for p in problems]
        columns = {name: [row.get(name) for row in rows] for name in names}
        total, per_func = self.score(prompts, shown, completion_ids, columns)
        if "math" in per_func:
            correct = [v is not None and v >= 1 for v in per_func["math"]]
        elif "exact" in per_func:
            correct = [v == 1 for v in per_func["exact"]]
        else:
            correct = [is_correct(c, p.answer) for c, p in zip(completions, problems, strict=True)]
        return total, correct


def format_bonus(completions: list[str], ended: list[bool], weight: float) -> list[float]:
    """``weight`` for a well-formed completion (it ended with EOS and has an extractable answer), else 0."""
    return [weight if done and extract_answer(c) is not None else 0.0
            for c, done in zip(completions, ended, strict=True)]


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
