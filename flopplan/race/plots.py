"""The plots of a RACE analysis, drawn from race.json's data alone (so a reloaded analysis redraws them):

* ``race_curves_<target>.png``: per arm, reward against total FLOPs (ledger + upfront): each seed's evaluations,
  the curve the decisions read (the model average of :mod:`flopplan.race.ensemble`) and its calibrated band, R0,
  the rung budgets and the target budget, and the interval the decision read at each budget beyond the arm's
  pilots, at every budget for an arm whose pilots never rose or fell (:func:`budget_marks`; they differ from the
  band there: such an arm is stated at what its pilots showed, from there to 1, and its band is not drawn; a seed's
  fall lowers every arm's lower end, :mod:`flopplan.race.grid_fall`);
* ``race_frontier_<target>.png``: every arm's fitted curve and their upper envelope (the frontier) over the parts
  where the arm is usable (dashed beyond: A unidentified past its pilots; dashed throughout: an arm whose pilots
  bound nothing), the regime named at each budget;
* ``race_split.png``: each arm's FLOP split at the target budget: rollout, learning, feedback, upfront.

matplotlib is imported inside :func:`draw_all` only; without it no plot is drawn.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from flopplan.fileio import atomic_savefig
from flopplan.race.checks import SUPPORT_TOL, UNBOUNDED
from flopplan.race.results import ArmCurve, RaceAnalysis, TargetResult
from flopplan.units import eng

SPLIT_PNG = "race_split.png"


def _foot(fig: Any, analysis: RaceAnalysis) -> None:
    fig.text(0.005, 0.005, f"regenerate: {analysis.command}   (RACE is a diagnostic, not a guarantee)", fontsize=6,
             color="grey", ha="left", va="bottom")


def _marks(ax: Any, analysis: RaceAnalysis) -> None:
    for r in analysis.rung_budgets:
        ax.axvline(r, color="grey", lw=0.6, ls=":")
    ax.axvline(analysis.budget_flops, color="black", lw=0.8, ls="--")


def _curves(plt: Any, analysis: RaceAnalysis, t: TargetResult, path: Path) -> Path:
    arms = [c for c in t.curves if c.observations]
    upfront = {a.info.name: a.info.upfront_flops for a in analysis.arms}
    cols = min(3, len(arms))
    rows = math.ceil(len(arms) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False, sharey=True)
    for ax, c in zip(axes.flat, arms, strict=False):
        u = upfront[c.arm]
        seeds = sorted({o.seed for o in c.observations})
        for i, s in enumerate(seeds):
            pts = [(o.flops + u, o.reward) for o in c.observations if o.seed == s and o.flops > 0]
            if pts:
                ax.plot(*zip(*pts, strict=True), "o", ms=3, alpha=0.6, color=f"C{i % 10}", label=f"seed {s}")
        unbounded = _unbounded(t, c.arm)
        if c.band is not None and c.band.flops and not unbounded:  # an unbounded arm's curves are not read
            x = np.asarray(c.band.flops) + u
            ax.fill_between(x, c.band.lo, c.band.hi, color="tab:blue", alpha=0.2, label="band")
            ax.plot(x, c.band.point, color="tab:blue", lw=1.2, label="model average")
        marks = budget_marks(t, c.arm)
        if marks:
            bx, by, blo, bhi = map(np.asarray, zip(*marks, strict=True))
            ax.errorbar(bx, by, yerr=[by - blo, bhi - by], fmt="s", ms=3, color="black", capsize=2, lw=0.9,
                        label="interval the decision read", gid="decision-intervals")
        if c.fit is not None:
            ax.axhline(c.fit.r0, color="grey", lw=0.6, ls="-.", label="R0")
        _marks(ax, analysis)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(plt.NullFormatter())  # under a decade, every minor tick would be labelled
        state = ("unbounded: curves not read" if unbounded else "identified" if c.identified else "A unidentified") \
            if c.fitted else "not fitted"
        ax.set_title(f"{c.arm} ({state}{'' if c.stable or not c.fitted else ', unstable'})", fontsize=9)
        ax.set_xlabel("FLOPs (ledger + upfront)", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(arms):]:
        ax.axis("off")
    axes.flat[0].set_ylabel(f"reward on {t.name}")
    axes.flat[0].legend(fontsize=6, loc="best")
    fig.suptitle(f"RACE pilots and fitted curves: {t.name} ({analysis.level:.0%} calibrated band; dashed: target "
                 "budget, dotted: rungs)", fontsize=10)
    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    _foot(fig, analysis)
    return _save(plt, fig, path)


def budget_marks(t: TargetResult, arm: str) -> list[tuple[float, float, float, float]]:
    """(budget FLOPs, reward, lo, hi) of ``arm``'s prediction at each of ``t``'s budgets read beyond its pilots
    (extrapolation above :data:`flopplan.race.checks.SUPPORT_TOL`), and at every budget for an arm its pilots do not
    bound (:data:`flopplan.race.checks.UNBOUNDED`): the interval the decision read there, which the band (the model
    average's calibrated percentiles) shows without its two adjustments (an unbounded arm stated at what its pilots
    showed, its interval from there or below to 1; a seed's fall's lower end)."""
    return [(b.flops, p.reward, p.lo, p.hi) for b in t.budgets for p in b.predictions
            if p.arm == arm and (p.extrapolation > SUPPORT_TOL or p.note in UNBOUNDED)]


def _unbounded(t: TargetResult, arm: str) -> bool:
    """Whether ``arm``'s pilots bound nothing (:data:`flopplan.race.checks.UNBOUNDED`): its curves are not read."""
    return any(p.arm == arm and p.note in UNBOUNDED for b in t.budgets for p in b.predictions)


def _valid(c: ArmCurve, x_ledger: np.ndarray) -> np.ndarray:
    return np.asarray((c.identified | (x_ledger <= SUPPORT_TOL * c.max_flops)) & c.stable)


def _frontier(plt: Any, analysis: RaceAnalysis, t: TargetResult, path: Path) -> Path:
    upfront = {a.info.name: a.info.upfront_flops for a in analysis.arms}
    fitted = [(c, c.band) for c in t.curves if c.band is not None and c.band.flops]
    lo = min(band.flops[0] + upfront[c.arm] for c, band in fitted)
    hi = max(band.flops[-1] + upfront[c.arm] for c, band in fitted)
    x = np.geomspace(lo, hi, 200)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    curves = []
    for i, (c, band) in enumerate(fitted):
        xl = x - upfront[c.arm]
        y = np.full(x.shape, np.nan)
        ok = xl >= band.flops[0]
        y[ok] = np.interp(np.log(xl[ok]), np.log(band.flops), band.point)
        valid = _valid(c, xl) & ok & (not _unbounded(t, c.arm))
        ax.plot(x[valid], y[valid], color=f"C{i % 10}", lw=1, label=c.arm)
        ax.plot(x[ok & ~valid], y[ok & ~valid], color=f"C{i % 10}", lw=1, ls="--", alpha=0.6)
        curves.append(np.where(valid, y, np.nan))
    stack = np.asarray(curves)
    has = ~np.all(np.isnan(stack), axis=0)
    best = np.full(x.shape, -1)
    best[has] = np.nanargmax(stack[:, has], axis=0)
    env = np.where(has, np.nanmax(np.where(np.isnan(stack), -np.inf, stack), axis=0), np.nan)
    ax.plot(x, env, color="black", lw=2.5, alpha=0.35, label="frontier (best usable arm)")
    rungs = len(analysis.rung_budgets)
    for b in t.budgets:
        ax.text(b.flops, 0.02, f" {b.shown(rungs)}: {b.decision.regime} ({b.decision.best or '-'})",
                transform=ax.get_xaxis_transform(), fontsize=7, ha="right", va="bottom", rotation=90)
    _marks(ax, analysis)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlabel("budget FLOPs (ledger + upfront)")
    ax.set_ylabel(f"predicted reward on {t.name}")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title(f"RACE frontier: {t.name} (dashed, not used: A unidentified beyond the pilots, or pilots that bound "
                 "nothing)", fontsize=10)
    fig.tight_layout(rect=(0, 0.03, 1, 0.93))
    _foot(fig, analysis)
    return _save(plt, fig, path)


def _split(plt: Any, analysis: RaceAnalysis, path: Path) -> Path:
    f = analysis.budget_flops
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(analysis.arms) + 1.6))
    names = [a.info.name for a in analysis.arms]
    left = np.zeros(len(names))
    parts = {"rollout": [], "learning": [], "feedback": [], "upfront": []}  # type: dict[str, list[float]]
    for a in (arm.info for arm in analysis.arms):
        run = max(f - a.upfront_flops, 0.0) / f
        for b in ("rollout", "learning", "feedback"):
            parts[b].append(a.split.get(b, 0.0) * run)
        parts["upfront"].append(min(a.upfront_flops / f, 1.0))
    for i, (b, shares) in enumerate(parts.items()):
        ax.barh(names, shares, left=left, color=f"C{i}", hatch="//" if b == "upfront" else None, label=b)
        left += np.asarray(shares)
    ax.set_xlim(0, 1)
    ax.set_xlabel(f"share of the target budget {eng(f)}")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_title("Budget split per arm at the target budget (upfront: a learned reward model's training)", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    _foot(fig, analysis)
    return _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: Path) -> Path:
    try:
        return atomic_savefig(fig, path)
    finally:
        plt.close(fig)


def slug(name: str) -> str:
    """A file-name-safe form of a target name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "target"


def target_plots(t: TargetResult) -> tuple[str, str] | None:
    """The curves and frontier PNG names of a target; None when it has no fitted curve to draw."""
    if not (t.fitted and any(c.fitted for c in t.curves)):
        return None
    return f"race_curves_{slug(t.name)}.png", f"race_frontier_{slug(t.name)}.png"


def draw_all(analysis: RaceAnalysis, folder: Path) -> list[Path]:
    """Draw the plots into ``folder`` (per fitted target its curves and frontier, then the budget split) and return
    their paths; [] without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    out = []
    for t in analysis.targets:
        names = target_plots(t)
        if names is not None:
            out += [_curves(plt, analysis, t, folder / names[0]), _frontier(plt, analysis, t, folder / names[1])]
    return [*out, _split(plt, analysis, folder / SPLIT_PNG)]
