"""Token-length distributions of prompts and completions, and how phase costs are averaged over them.

Every phase cost is a polynomial of degree at most 2 in the prompt length and in the completion length (attention
is quadratic, everything else linear), and the two are independent. The expectation of such a polynomial only
depends on each variable's first two moments, so it is computed exactly by a two-point Gauss rule per variable
(nodes ``mean -/+ std``, weights 1/2 each; exact up to degree 3). This is how ``E[K^2]`` (not ``E[K]^2``) enters
the attention terms. A fixed length is a single integer node, so fixed-length costs stay exact integers.

Padded batches run to the longest member: the maximum of ``n`` independent draws has the distribution
``P(max <= k) = F(k)^n``, from which its moments follow exactly.

Three ways to give a length:

* ``fixed``: every sequence has the same length;
* ``mean`` and ``max`` (optionally ``min``): the maximum-entropy distribution on ``[min, max]`` with that mean,
  ``p(k) ~ exp(lambda k)`` (uniform when the mean is the midpoint; mass piles up near ``max`` when the mean is
  close to it, as with truncated RL completions). It is the least-informative choice given only these numbers;
* ``empirical``: a list of observed lengths (e.g. from a previous run), used as its empirical distribution.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flopplan.errors import UserError
from flopplan.fileio import read_text

MAX_LENGTH = 1 << 20
"""Longest supported length (1,048,576 tokens): the distributions are held over their whole support."""

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Length:
    """A distribution over positive integer lengths, stored as support and probabilities."""

    support: tuple[int, ...]
    probs: tuple[float, ...]
    kind: str = "fixed"
    source: str = ""
    data: Any = None  # the recipe form it was made from (saved back unchanged)

    # -- constructors -------------------------------------------------------------------------------------------
    @staticmethod
    def fixed(n: int) -> Length:
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise UserError(f"a length must be a positive integer, not {n!r}")
        if n > MAX_LENGTH:  # as for a distribution's max and a file's lengths
            raise UserError(f"length {n:,} is above the supported {MAX_LENGTH:,} tokens")
        return Length((n,), (1.0,), "fixed", data=n)

    @staticmethod
    def mean_max(mean: float, maximum: int, minimum: int = 1) -> Length:
        """Maximum-entropy distribution on ``[minimum, maximum]`` with the given mean."""
        for name, value in (("max", maximum), ("min", minimum)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise UserError(f"length {name} must be a positive integer, not {value!r}")
        if maximum > MAX_LENGTH:
            raise UserError(f"length max {maximum} is above the supported {MAX_LENGTH:,} tokens")
        if not math.isfinite(mean) or not minimum <= mean <= maximum:
            raise UserError(f"length mean {mean} must lie between min {minimum} and max {maximum}")
        if minimum == maximum or mean in (minimum, maximum):
            return Length.fixed(round(mean))
        import numpy as np  # lazily: fixed-length planning never needs it

        ks = np.arange(minimum, maximum + 1, dtype=np.float64)
        probs = _max_entropy_probs(ks, float(mean))
        data: dict[str, Any] = {"mean": mean, "max": maximum}
        if minimum != 1:
            data["min"] = minimum
        return Length(tuple(range(minimum, maximum + 1)), tuple(probs.tolist()), "mean_max",
                      f"mean {mean:g}, max {maximum}" + (f", min {minimum}" if minimum != 1 else ""), data)

    @staticmethod
    def empirical(lengths: list[int], source: str = "", data: Any = None) -> Length:
        counts: dict[int, int] = {}
        for n in lengths:
            counts[n] = counts.get(n, 0) + 1
        return Length.from_counts(counts, source, data)

    @staticmethod
    def from_counts(counts: dict[int, int], source: str = "", data: Any = None) -> Length:
        """The empirical distribution of lengths observed ``counts[length]`` times."""
        where = f" in {source}" if source else ""
        if not counts:
            raise UserError(f"no lengths{where or ' in the list'}")
        for n, c in counts.items():
            if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= MAX_LENGTH:
                raise UserError(f"lengths must be integers from 1 to {MAX_LENGTH:,}; found {n!r}{where}")
            if isinstance(c, bool) or not isinstance(c, int) or c <= 0:
                raise UserError(f"length counts must be positive integers; found {c!r}{where}")
        support = tuple(sorted(counts))
        total = sum(counts.values())
        if data is None:
            data = {"counts": {str(k): counts[k] for k in support}}
        return Length(support, tuple(counts[k] / total for k in support), "empirical",
                      source or f"{total:,} lengths", data)

    @staticmethod
    def from_file(path: str | Path) -> Length:
        """Lengths from a file: one integer per line, a JSON list, or JSONL objects with a ``length`` field."""
        path = Path(path)
        stripped = read_text(path, "lengths file").strip()
        values: list[Any]
        try:
            if stripped.startswith("["):
                values = json.loads(stripped)
            elif stripped.startswith("{"):
                values = [json.loads(line)["length"] for line in stripped.splitlines() if line.strip()]
            else:
                values = [int(line) for line in stripped.splitlines() if line.strip()]  # "5 6" is no length
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise UserError(f"lengths file {str(path)!r} is malformed ({exc}): use one integer per line, a JSON "
                            "list, or JSONL with a 'length' field") from None
        # the absolute path, so a saved recipe or plan file reads it from anywhere
        return Length.empirical(values, source=path.name, data={"file": str(path.resolve())})

    @staticmethod
    def parse(spec: Any, what: str = "length") -> Length:
        """From a recipe value: an int, ``{"fixed": n}``, ``{"mean": m, "max": M[, "min": n]}``, ``{"file": p}``,
        ``{"lengths": [...]}``, or a CLI string ``"1024"``, ``"600:1024"`` (mean:max), ``"@lengths.txt"``."""
        if isinstance(spec, Length):
            return spec
        if isinstance(spec, str):
            text = spec.strip()
            if text.startswith("@"):
                return Length.from_file(text[1:])
            mean_text, colon, max_text = text.partition(":")
            try:
                mean, maximum = float(mean_text), int(max_text) if colon else None
                fixed = None if colon else int(text)
            except ValueError:
                raise UserError(f"{what} {spec!r}: use N, MEAN:MAX or @FILE") from None
            if maximum is not None:
                return Length.mean_max(mean, maximum)
            assert fixed is not None
            return Length.fixed(fixed)
        if isinstance(spec, int) and not isinstance(spec, bool):
            return Length.fixed(spec)
        if isinstance(spec, dict):
            keys = set(spec)
            if keys == {"fixed"}:
                return Length.fixed(spec["fixed"])
            if keys in ({"mean", "max"}, {"mean", "max", "min"}):
                if not isinstance(spec["mean"], (int, float)) or isinstance(spec["mean"], bool):
                    raise UserError(f"{what} mean must be a number, not {spec['mean']!r}")
                return Length.mean_max(spec["mean"], spec["max"], spec.get("min", 1))
            if keys == {"file"}:
                return Length.from_file(spec["file"])
            if keys == {"lengths"} and isinstance(spec["lengths"], list):
                return Length.empirical(spec["lengths"], data=spec)
            if keys == {"counts"} and isinstance(spec["counts"], dict):
                try:
                    counts = {int(k): c for k, c in spec["counts"].items()}
                except (TypeError, ValueError):
                    raise UserError(f"{what} counts must map lengths to counts, got {spec['counts']!r}") from None
                return Length.from_counts(counts, data=spec)
        raise UserError(f"{what} must be an integer, {{fixed}}, {{mean, max[, min]}}, {{file}}, {{lengths}} or "
                        "{counts}; "
                        f"got {spec!r}")

    def to_data(self) -> Any:
        """The recipe form it was given in (for saving)."""
        return self.data if self.data is not None else self.support[0]

    # -- moments ------------------------------------------------------------------------------------------------
    @property
    def is_fixed(self) -> bool:
        return len(self.support) == 1

    @property
    def min(self) -> int:
        return self.support[0]

    @property
    def max(self) -> int:
        return self.support[-1]

    def _weighted_sum(self, power: int) -> float:
        if len(self.support) < 1024:
            return math.fsum(k ** power * p for k, p in zip(self.support, self.probs, strict=True))
        import numpy as np

        return float(np.asarray(self.probs) @ np.asarray(self.support, dtype=np.float64) ** power)

    @cached_property
    def mean(self) -> float:
        return self._weighted_sum(1)

    @cached_property
    def _moment2(self) -> float:
        return self._weighted_sum(2)

    def variance(self) -> float:
        m = self.mean
        return max(0.0, self._moment2 - m * m)

    def quadrature(self) -> list[tuple[int | float, float]]:
        """Nodes and weights exact for polynomials of degree <= 3; a fixed length is one integer node."""
        if self.is_fixed:
            return [(self.support[0], 1.0)]
        m, s = self.mean, math.sqrt(self.variance())
        return [(m - s, 0.5), (m + s, 0.5)]

    def max_of(self, n: int) -> Length:
        """The distribution of the largest of ``n`` independent draws (a padded batch runs to it)."""
        if n <= 1 or self.is_fixed:
            return self
        import numpy as np

        cdf = np.minimum(np.cumsum(np.asarray(self.probs, dtype=np.float64)), 1.0)
        cdf[-1] = 1.0
        at_most = cdf ** n
        probs = np.diff(np.concatenate(([0.0], at_most)))
        return Length(self.support, tuple(probs.tolist()), "max", f"max of {n} x ({self.describe()})")

    def spec(self) -> str:
        """The CLI string :meth:`parse` reads back to this length where there is one (``N``, ``MEAN:MAX``,
        ``@FILE``); otherwise (a ``min``, a list of lengths or counts) :meth:`describe`."""
        data = self.data if isinstance(self.data, dict) else {}
        if self.kind == "mean_max" and set(data) == {"mean", "max"}:
            return f"{float(data['mean']):g}:{int(data['max'])}"
        if set(data) == {"file"}:
            return f"@{data['file']}"
        return self.describe()

    def describe(self) -> str:
        if self.is_fixed:
            return str(self.support[0])
        if self.kind == "mean_max":
            return self.source
        return f"{self.source}: mean {self.mean:.1f}, max {self.max}"


def _max_entropy_probs(ks: np.ndarray, mean: float) -> np.ndarray:
    """p(k) ~ exp(lambda k) on the support ``ks`` with the given mean.

    The mean is increasing in lambda; the bracket grows until it holds the target, then bisection; the result
    is checked, so a mean the family cannot reach is an error, not a silently different distribution.
    """
    import numpy as np

    span = float(ks[-1] - ks[0])

    def probs_for(lam: float) -> np.ndarray:
        logits = lam * ks
        weights = np.exp(logits - logits.max())  # relative to the largest, for stability
        return weights / weights.sum()

    def mean_of(lam: float) -> float:
        return float(probs_for(lam) @ ks)

    a, b = -1.0 / span, 1.0 / span
    while mean_of(a) > mean and a > -1e6:
        a *= 2
    while mean_of(b) < mean and b < 1e6:
        b *= 2
    for _ in range(200):
        mid = (a + b) / 2
        if mean_of(mid) < mean:
            a = mid
        else:
            b = mid
        if b - a <= 1e-13 * max(abs(a), abs(b), 1e-300):
            break
    probs = probs_for((a + b) / 2)
    reached = float(probs @ ks)
    if abs(reached - mean) > 1e-6 * max(1.0, span):
        raise UserError(f"no maximum-entropy length distribution on [{int(ks[0])}, {int(ks[-1])}] has mean "
                        f"{mean:g} (closest {reached:.3f}); use a fixed length or an empirical one")
    return probs


# -- length sources of a round's batches (flopplan.passes) -----------------------------------------------------
# A *source* is a Length (a distribution), a number or numpy array (fixed lengths), or Observed (the lengths of a
# round's sequences, one per row, in round order); padding rules apply to a source through prompt_width and
# completion_width.

def distinct_prompts(rows: int, group: int) -> int:
    """Distinct prompts in a batch of ``rows`` sequences laid out group by group: ``ceil(rows / group)``."""
    return max(1, -(-rows // group))


@dataclass(frozen=True)
class Observed:
    """Lengths of the round's sequences, one per row in round order (prompts repeat within a group): each row's
    own (``values``) and the width it ran at (``widths``, padding included; None: its own)."""

    values: tuple[int, ...]
    widths: tuple[int, ...] | None = None

    @property
    def ran(self) -> tuple[int, ...]:
        """The width each row ran at."""
        return self.values if self.widths is None else self.widths

    def rows(self, start: int, stop: int) -> Observed:
        """Rows ``start:stop``."""
        return Observed(self.values[start:stop], None if self.widths is None else self.widths[start:stop])


def prompt_width(source: Any, rows: Any, group: Any) -> Any:
    """The prompt width of batches of ``rows`` sequences left-padded to their longest prompt. A distribution gives
    the maximum over the distinct prompts of the batch; observed lengths give each row its batch's maximum."""
    if isinstance(source, Length):
        return source.max_of(distinct_prompts(rows, group))
    if isinstance(source, Observed):
        return _batch_maxima(source, rows)
    return source


def completion_width(source: Any, rows: Any) -> Any:
    """The completion width of batches of ``rows`` sequences right-padded to (run until) their longest."""
    if isinstance(source, Length):
        return source.max_of(rows)
    if isinstance(source, Observed):
        return _batch_maxima(source, rows)
    return source


def per_prompt(source: Any, group: int) -> Any:
    """One length per prompt of a source with one per row (the rows of a group share their prompt)."""
    if isinstance(source, Observed):
        return Observed(source.values[::group], None if source.widths is None else source.widths[::group])
    return source


def _batch_maxima(source: Observed, rows: int) -> Observed:
    """Each row's own length kept, its width the longest of its batch of ``rows``."""
    widths = source.ran
    out: list[int] = []
    for start in range(0, len(widths), rows):
        chunk = widths[start:start + rows]
        out += [max(chunk)] * len(chunk)
    return Observed(source.values, tuple(out))


def mean_of(source: Any) -> Any:
    """The expected length of a source (a number or array stays itself)."""
    if isinstance(source, Length):
        return source.mean
    if isinstance(source, Observed):
        return sum(source.values) / len(source.values)
    return source
