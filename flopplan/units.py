"""Engineering units for humans: 3.2 EFLOP, 1.54 B, 12.3 %. Machines get the exact integers instead."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_PREFIXES = ((1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_COUNT = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


def eng(value: float, unit: str = "FLOP", digits: int = 3) -> str:
    """``3.16e18`` -> ``3.16 EFLOP`` (three significant digits by default)."""
    value = float(value)
    magnitude = abs(value)
    rounds_up = 1 - 5 * 10 ** (-digits - 1)  # 999.7 k prints as 1 M, not 1.00e+03 k
    for scale, prefix in _PREFIXES:
        if magnitude >= scale * rounds_up:
            return f"{_sig(value / scale, digits)} {prefix}{unit}"
    return f"{_sig(value, digits)} {unit}"


def apart(value: float, other: float, show: Callable[[float, int], str], digits: int = 3) -> str:
    """``show(value, d)`` with the fewest digits d (``digits`` at least) at which it does not read as ``other`` does,
    when the two differ: 999.5 PFLOP spent of a 1 EFLOP budget is not "1 EFLOP", nor a 3.0016 PFLOP step "3 PFLOP"
    beside a 3 PFLOP budget. Where 16 digits do not tell them apart, the 16-digit text."""
    for d in range(digits, 17):
        text = show(value, d)
        if value == other or text != show(other, d):
            return text
    return show(value, 16)


def count(value: float, digits: int = 3) -> str:
    """A count with a B/M/k suffix: ``1543714304`` -> ``1.54 B``; small counts print exactly."""
    magnitude = abs(float(value))
    if magnitude < 1e4 and float(value).is_integer():
        return f"{int(value):,}"
    rounds_up = 1 - 5 * 10 ** (-digits - 1)  # 999.9 M prints as 1 B, not 1.00e+03 M
    for scale, suffix in _COUNT:
        if magnitude >= scale * rounds_up:
            return f"{_sig(value / scale, digits)} {suffix}"
    return _sig(value, digits)


def percent(part: float, whole: float, digits: int = 1) -> str:
    if not whole:
        return "-"
    return f"{100.0 * float(part) / float(whole):.{digits}f} %"


def _sig(value: float, digits: int) -> str:
    if value == 0:
        return "0"
    text = f"{value:.{digits}g}"
    if "e" in text:
        return f"{value:.{digits - 1}e}"
    return text


def duration(seconds: float) -> str:
    """``42.0`` -> ``42 s``, ``5400`` -> ``90 min``, ``9000`` -> ``2.5 h``: the unit that keeps the number readable."""
    if seconds < 120:
        return f"{_sig(seconds, 3)} s"
    if seconds < 7200:
        return f"{_sig(seconds / 60, 3)} min"
    if seconds < 172800:
        return f"{_sig(seconds / 3600, 3)} h"
    return f"{_sig(seconds / 86400, 3)} d"


def plural(count: int, noun: str) -> str:
    """``1 step``, ``3 steps``, ``1,200 steps``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def as_int(value: Any) -> int:
    """An expected count as an integer (rounded); integers stay exact."""
    return round(float(value)) if not isinstance(value, int) else value
