"""From a race folder to the analysis's input: how far each arm got by the runner's promotions, then each arm's
pilots' evaluations (exact training FLOPs, one score per evaluation prompt) per target, and what all pilots spent
by their ledgers (:func:`flopplan.race.pilots.pilot_input`)."""

from __future__ import annotations

from pathlib import Path

from flopplan.errors import UserError
from flopplan.race.analysis import RaceInput
from flopplan.race.design import RaceDesign
from flopplan.race.pilots import arm_done, pilot_input
from flopplan.race.runner import rung_arms


def reached_rungs(design: RaceDesign, folder: Path) -> dict[str, int]:
    """The highest rung each arm's pilots (all seeds) finished; -1 for none."""
    arms = rung_arms(design, folder)
    reached = {a.name: -1 for a in design.arms}
    for rung, names in enumerate(arms):
        for name in names:
            if arm_done(design, folder, name, rung):
                reached[name] = rung
    return reached


def unfinished_rung(design: RaceDesign, folder: Path) -> int | None:
    """The first rung of the race in ``folder`` whose pilots (the arms the promotions sent to it, every seed) have
    not all finished; None when the race is complete."""
    arms = rung_arms(design, folder)
    rung = len(arms) - 1
    if not all(arm_done(design, folder, a, rung) for a in arms[-1]):
        return rung
    return None if rung == len(design.rung_flops) - 1 else rung + 1


def race_input(design: RaceDesign, folder: str | Path, command: str = "") -> RaceInput:
    """The analysis's input from the finished pilots of ``folder`` (an arm counts from the rung its seeds all
    finished; a pilot's evaluations are read up to that rung's budget, so a pilot already running its next rung
    does not change the analysis). Every arm must have finished the first rung, as the runner's halving needs: an
    arm left out would be passed over without a word."""
    folder = Path(folder)
    reached = reached_rungs(design, folder)
    if all(r < 0 for r in reached.values()):
        raise UserError(f"no arm of the race in {str(folder)!r} has finished its first rung: run `flopplan race run`")
    behind = [name for name, r in reached.items() if r < 0]
    if behind:  # analysed without them, the recommendation would pass over arms nothing ruled out
        raise UserError(f"{len(behind)} arm{'s' if len(behind) > 1 else ''} of the race in {str(folder)!r} "
                        f"{'have' if len(behind) > 1 else 'has'} not finished the first rung ({', '.join(behind[:3])}"
                        f"{', ...' if len(behind) > 3 else ''}: pilots missing or still running): RACE compares "
                        "every arm of the design, so finish them first (`flopplan race run`, every shard)")
    sent = {name: rung for rung, names in enumerate(rung_arms(design, folder)) for name in names}  # its last
    running = frozenset(name for name, rung in sent.items() if reached.get(name, -1) < rung)
    return pilot_input(design, folder, {k: v for k, v in reached.items() if v >= 0}, command, running)
