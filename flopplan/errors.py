"""The one exception type for bad input (the CLI turns it into one line on stderr and exit code 2), the one for a run
the user interrupted (one line, exit code 130), and the checks every seam uses to produce them."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, TypeGuard


class UserError(ValueError):
    """Bad input from the user: unknown model, malformed config or plan, impossible budget, bad sizes."""


class Interrupted(Exception):
    """A run stopped by a signal the user sent it (a race's pilot sent SIGINT or SIGTERM alone), which the same
    command resumes: not bad input and not a failure. The CLI says so in one line and exits 130, as interrupted
    programs do."""


class Note(UserWarning):
    """A fallback taken on the user's behalf that a result still holds (a fine-tune's id counted with its base
    model's shapes): a warning to the Python API, one ``flopplan: note:`` line on stderr to the CLI."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (library errors can span a page), or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def is_int(value: Any) -> TypeGuard[int]:
    """A Python integer that is not a bool (JSON ``true`` must not pass as 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> TypeGuard[int | float]:
    """A finite int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_int(name: str, value: Any, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` as an integer >= ``minimum`` (and <= ``maximum``), or a one-line UserError naming ``name``."""
    if not is_int(value) or value < minimum or (maximum is not None and value > maximum):
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        if maximum is not None:
            what = f"an integer from {minimum} to {maximum:,}"
        raise UserError(f"{name} must be {what}, not {value!r}")
    return int(value)


def check_number(name: str, value: Any, minimum: float = 0.0, strict: bool = False) -> float:
    """``value`` as a finite number >= ``minimum`` (> with ``strict``), or a one-line UserError."""
    if not is_number(value) or value < minimum or (strict and value == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise UserError(f"{name} must be a number {bound}, not {value!r}")
    return float(value)


def check_choice(name: str, value: Any, allowed: Iterable[str]) -> str:
    """``value`` as one of ``allowed``, or a one-line UserError listing them."""
    options = tuple(allowed)
    if value not in options:
        raise UserError(f"{name} must be one of {', '.join(options)}, not {value!r}")
    return str(value)


def first_problem(checks: Iterable[tuple[bool, str]]) -> str:
    """The message of the first check that fails, '' when all hold: a loaded file's values checked in order
    (a manifest, race.json), so the one line names the first field no writer would have written."""
    return next((what for ok, what in checks if not ok), "")
