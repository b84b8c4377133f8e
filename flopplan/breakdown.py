"""FLOPs by term: the breakdown every count returns (:mod:`flopplan.formulas` writes each term once; ``total`` is
their exact sum), and the grouping of its terms by the module they belong to."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from flopplan.attention import Num


class Breakdown(dict[str, Num]):
    """FLOPs by term. ``total`` is the exact sum; terms are never dropped."""

    @property
    def total(self) -> Num:
        return sum(self.values(), 0)

    def add(self, key: str, value: Num) -> None:
        self[key] = self[key] + value if key in self else value

    def prefixed(self, prefix: str) -> Breakdown:
        return Breakdown({f"{prefix}/{key}": value for key, value in self.items()})

    def grouped(self, key_of: Callable[[str], str]) -> Breakdown:
        out = Breakdown()
        for key, value in self.items():
            out.add(key_of(key), value)
        return out

    def scaled(self, factor: Num) -> Breakdown:
        return Breakdown({key: value * factor for key, value in self.items()})

    @staticmethod
    def combine(parts: Iterable[Breakdown]) -> Breakdown:
        out = Breakdown()
        for part in parts:
            for key, value in part.items():
                out.add(key, value)
        return out


def component(term: str) -> str:
    """Group a term by the module it belongs to: ``backward/q_proj.lora_a.wgrad`` -> ``q_proj``."""
    return term.rsplit("/", 1)[-1].split(".", 1)[0]
