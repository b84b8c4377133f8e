"""RACE on the terminal and in papers: the design's arms and ladder, the recommendation per target, the regret
benchmark's rows (tables as data, :class:`flopplan.report.tables.Table`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flopplan.race.design import RaceDesign
from flopplan.race.results import RaceAnalysis
from flopplan.report.tables import Table
from flopplan.units import eng


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _r(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def design_table(design: RaceDesign) -> tuple[Table, list[str]]:
    """One row per arm: its axes, steps per rung, one evaluation's FLOPs and its split at the top rung."""
    rungs = [f"steps @ {eng(b)}" for b in design.rung_flops]
    table = Table(f"RACE design: {len(design.arms)} arms x {len(design.seeds)} seeds, F = {eng(design.budget_flops)}",
                  ["arm", "params", *rungs, "eval", "rollout", "learning", "feedback"])
    for arm in design.arms:
        split = arm.split()
        spec = arm.recipe.policy_spec  # an MoE policy: total and active (per token) parameters
        params = f"{spec.params:,}" + (f" ({spec.params_active:,} active)" if spec.moe is not None else "")
        table.rows.append([arm.name, params, *(str(e.steps) for e in arm.rungs),
                           eng(arm.eval_flops), _pct(split.get("rollout")), _pct(split.get("learning")),
                           _pct(split.get("feedback"))])
    keep = " -> ".join(str(k) for k in design.keep)
    room = " -> ".join(str(r) for r in design.room)
    notes = [f"arms per rung {keep} (successive halving, eta {design.eta}: the arms that may be best at F), the "
             f"budget's room {room} (more go on only when the evidence cannot rule them out at F)",
             f"worst case of all pilots {eng(design.worst_case_flops)} <= phi x F = {eng(design.pilot_cap)} "
             f"(phi {design.pilot_fraction:g})",
             f"evaluations at step 0, at each rung's end and after {len(design.eval_points)} points, "
             f"{eng(design.eval_points[0])} to {eng(design.eval_points[-1])} training FLOPs, on "
             f"{', '.join(design.targets)} (decisions use {', '.join(design.fit_targets)})", *design.notes]
    return table, notes


def recommendation_table(analysis: RaceAnalysis) -> tuple[Table, list[str]]:
    """One row per fitted target: the arm, its prediction and interval at F, P(best), runner-up and margin."""
    level = f"{analysis.level:.0%}"
    table = Table(f"RACE recommendation at F = {eng(analysis.budget_flops)}",
                  ["target", "arm", "regime", "confidence", "reward", f"{level} interval", "P(best)", "runner-up",
                   "margin", "extrapolation"])
    for rec in analysis.recommendations:
        interval = "-" if rec.lo is None or rec.hi is None else f"[{rec.lo:.3f}, {rec.hi:.3f}]"
        margin = _r(rec.margin) if rec.margin_lo is None else (
            f"{rec.margin:.3f} [{rec.margin_lo:.3f}, {rec.margin_hi:.3f}]" if rec.margin is not None else "-")
        table.rows.append([rec.target, rec.arm or "-", rec.regime, rec.confidence, _r(rec.reward), interval,
                           _r(rec.p_best), rec.runner_up or "-", margin,
                           "-" if rec.extrapolation is None else f"{rec.extrapolation:.1f}x"])
    for target in analysis.targets:
        if target.fitted and target.recommendation is None:
            table.rows.append([target.name, "-", "unfitted", "none", "-", "-", "-", "-", "-", "-"])
    notes = [f"pilots spent {eng(analysis.pilot_flops)} = {_pct(analysis.pilot_share)} of F by their ledgers",
             *(w for t in analysis.targets for w in t.warnings), analysis.statement]
    return table, notes


def regret_table(rows: list[dict[str, Any]]) -> Table:
    """benchmarks/race_regret.py: per repetition and target, RACE's pick against the exhaustive ranking."""
    table = Table("RACE against the exhaustive answer", ["repetition", "target", "RACE's arm", "rank", "regret",
                                                          "seed noise", "exhaustive best", "pilot share"])
    for row in rows:
        rank = "-" if row["rank"] is None else f"{row['rank']} of {row['arms']}"
        table.rows.append([str(row["repetition"]), row["target"], row["arm"] or "none", rank, _r(row["regret"]),
                           f"{row['noise']:.3f}", row["best"], _pct(row["pilot_share"])])
    return table


def realized_table(rows: list[dict[str, Any]]) -> Table:
    """benchmarks/race_regret.py: per validating run and target, what the run reached at F against the exhaustive
    answer (one run: its seed's luck is in it; the arm's own exhaustive mean and one run's sd beside it)."""
    table = Table("The validating run against the exhaustive answer",
                  ["repetition", "target", "arm", "reached at F", "arm's exhaustive mean", "one run's sd",
                   "exhaustive best", "best's mean", "regret of the run"])
    for row in rows:
        table.rows.append([str(row["repetition"]), row["target"], row["arm"], _r(row["reached"]),
                           _r(row["arm_mean"]), "-" if row["seed_sd"] is None else f"{row['seed_sd']:.3f}",
                           row["best"], _r(row["best_mean"]), _r(row["regret"])])
    return table


def arms_at_budget_table(analysis: RaceAnalysis, target: str) -> Table:
    """The paper table of one fitted target: per arm, its axes, parameters, split, how far it ran, and the
    prediction at F (reward, interval, P(best)) or why there is none."""
    level = f"{analysis.level:.0%}"
    result = next(t for t in analysis.targets if t.name == target)
    at_f = {p.arm: p for p in result.budgets[-1].predictions} if result.budgets else {}
    table = Table(f"RACE arms at F = {eng(analysis.budget_flops)} ({target})",
                  ["arm", "params", *analysis.axes, "rollout", "learning", "feedback", "rung", "reward at F",
                   f"{level} interval", "P(best), curves"])
    table.notes = ["P(best), curves: the share of the calibrated curves' bootstrap draws at F in which the arm is the "
                   "best comparable arm (the decision's, race.json's predictions at F); the recommendation states its "
                   "own P(best) among the finalists, from the reward seen at the largest pilot carried by the curves' "
                   "change (race.json's recommendation)"]
    rungs = len(analysis.rung_budgets)
    for arm in analysis.arms:
        info = arm.info
        pred = at_f.get(info.name)
        cells = ([_r(pred.reward), f"[{pred.lo:.3f}, {pred.hi:.3f}]", _r(pred.p_best)] if pred is not None
                 else ["-", "-", "-"])
        table.rows.append([info.name, f"{info.params:,}", *(str(info.axes.get(a, "-")) for a in analysis.axes),
                           _pct(info.split.get("rollout")), _pct(info.split.get("learning")),
                           _pct(info.split.get("feedback")), f"{arm.reached + 1} of {rungs}", *cells])
    return table


def paper_tables(analysis: RaceAnalysis, regret_rows: list[dict[str, Any]] | None = None) -> dict[str, list[Table]]:
    """The tables ``flopplan tables --race DIR`` writes: the recommendation, the arms at F per fitted target and,
    when the folder holds a regret benchmark's rows, RACE against the exhaustive answer."""
    recommendation, notes = recommendation_table(analysis)
    recommendation.notes = notes[:-1]  # the statement is long prose: the report carries it
    out = {"race_recommendation": [recommendation],
           "race_arms": [arms_at_budget_table(analysis, t) for t in analysis.fitted_targets]}
    if regret_rows:
        out["race_regret"] = [regret_table(regret_rows)]
    return out


def race_tables(race_dir: str | Path) -> dict[str, str]:
    """A race's paper tables from its race.json (and regret.json, when benchmarks/race_regret.py wrote one), with
    the command that regenerates them in every header."""
    from flopplan.fileio import is_file, read_json
    from flopplan.race.results import load_analysis
    from flopplan.report.tables import to_latex, to_markdown

    folder = Path(race_dir)
    if not is_file(folder / "race.json", "race.json "):
        from flopplan.errors import UserError

        raise UserError(f"{str(folder)!r} has no race.json: run `flopplan race analyze {race_dir}` first")
    analysis = load_analysis(folder / "race.json")
    regret = folder / "regret.json"
    rows = read_json(regret, "regret benchmark")["rows"] if regret.is_file() else None
    command = f"flopplan tables --race {race_dir}"
    files: dict[str, str] = {}
    for stem, group in paper_tables(analysis, rows).items():
        files[f"{stem}.md"] = to_markdown(group, command)
        files[f"{stem}.tex"] = to_latex(group, command)
    return files
