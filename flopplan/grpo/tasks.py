"""Problems to train on: the built-in procedural task, JSONL datasets, and rule-based answer checking.

Built-in task (``digits``): the prompt is a random string of digits followed by ``>``, the answer is one digit
computed from it (by default the first digit). The held-out strings never occur in training (the 10,000 strings
of the default length are split, not resampled), chance accuracy is 1/10, and a few-hundred-thousand-parameter
policy learns it from random initialisation on CPU in about a minute of GRPO. Other rules (``last``, ``max``,
``sum``: the digit sum mod 10) make it harder.

Datasets (JSONL, parquet, chat prompts) are read by :mod:`flopplan.grpo.data`; a GSM8K-style answer ending in
``#### 42`` is reduced to ``42`` (:func:`reference_answer`).
"""

from __future__ import annotations

import random
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flopplan.errors import UserError

RULES = ("first", "last", "max", "sum")


@dataclass(frozen=True)
class Problem:
    """A prompt (the text the policy reads; a conversation's as its chat template rendered it) and its reference
    answer; ``messages``: the conversation itself (None: a plain prompt); ``columns``: the row's fields besides the
    prompt, for reward functions."""

    prompt: str
    answer: str
    messages: tuple[dict[str, str], ...] | None = field(default=None, compare=False)
    columns: Mapping[str, Any] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class DigitTask:
    """Random digit strings of ``length`` digits; the answer digit is given by ``rule``."""

    rule: str = "first"
    length: int = 4

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise UserError(f"unknown digits rule {self.rule!r}: use one of {', '.join(RULES)}")
        if not 1 <= self.length <= 32:
            raise UserError(f"digits length must be between 1 and 32, not {self.length}")

    @property
    def chance(self) -> float:
        return 0.1

    def answer(self, digits: list[int]) -> str:
        if self.rule == "first":
            return str(digits[0])
        if self.rule == "last":
            return str(digits[-1])
        if self.rule == "max":
            return str(max(digits))
        return str(sum(digits) % 10)

    def _problem(self, digits: list[int]) -> Problem:
        return Problem(" ".join(map(str, digits)) + " >", self.answer(digits))

    def split(self, train: int, held_out: int, seed: int) -> tuple[list[Problem], list[Problem]]:
        """Disjoint training and held-out problems (no string in both), sampled without repetition; the
        training set is at most what the held-out set leaves of the 10^length strings."""
        rng = random.Random(seed)
        space = 10 ** self.length
        if held_out >= space:
            raise UserError(f"the digits task of length {self.length} has only {space:,} problems: "
                            f"{held_out:,} cannot be held out")
        wanted = min(space, held_out + train)
        if space <= sys.maxsize:  # random.sample draws from a range without materialising it
            order = rng.sample(range(space), wanted)
        else:  # beyond 2^63 strings: rejection sampling, with (at most a million) draws a vanishing share
            drawn: dict[int, None] = {}
            while len(drawn) < wanted:
                drawn.setdefault(rng.randrange(space))
            order = list(drawn)
        strings = [[int(c) for c in str(n).zfill(self.length)] for n in order]
        return [self._problem(d) for d in strings[held_out:]], [self._problem(d) for d in strings[:held_out]]


def parse_task(name: str) -> DigitTask:
    """``digits``, ``digits:last``, ``digits:sum:6`` (rule and length)."""
    parts = name.split(":")
    if parts[0] != "digits" or len(parts) > 3:
        raise UserError(f"unknown task {name!r}: use digits[:RULE[:LENGTH]] (rules: {', '.join(RULES)})")
    rule = parts[1] if len(parts) > 1 else "first"
    try:
        length = int(parts[2]) if len(parts) > 2 else 4
    except ValueError:
        raise UserError(f"task length must be an integer in {name!r}") from None
    return DigitTask(rule, length)


_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_BOXED = "\\boxed{"


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (braces inside it balanced), None without one."""
    start = text.rfind(_BOXED)
    while start != -1:
        depth, i = 1, start + len(_BOXED)
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            return text[start + len(_BOXED):i - 1]
        start = text.rfind(_BOXED, 0, start)
    return None


def extract_answer(completion: str) -> str | None:
    """The final answer of a completion: ``\\boxed{...}``, else after ``####``, else the last number."""
    boxed = last_boxed(completion)
    if boxed is not None:
        return boxed.strip()
    if "####" in completion:
        return completion.rsplit("####", 1)[1].strip() or None
    numbers = _NUMBER.findall(completion)
    return numbers[-1] if numbers else None


def reference_answer(text: str) -> str:
    """What a dataset's answer field holds to compare against: after ``####`` (GSM8K), else the last ``\\boxed{}``
    (a MATH solution), else the text itself; stripped."""
    if "####" in text:
        return text.rsplit("####", 1)[1].strip()
    boxed = last_boxed(text)
    return boxed.strip() if boxed is not None else text.strip()


def normalize(answer: str) -> str:
    text = answer.strip().replace(",", "").replace(" ", "").rstrip(".")
    try:
        value = float(text)
    except ValueError:
        return text
    return str(int(value)) if value.is_integer() else str(value)


def is_correct(completion: str, answer: str) -> bool:
    found = extract_answer(completion)
    return found is not None and normalize(found) == normalize(answer)
