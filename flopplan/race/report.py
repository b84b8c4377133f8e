"""race.json, report.md and the plots of a RACE analysis, each regenerable from the command recorded in its header.

race.json and report.md hold no timestamp: the same input and seed give the same bytes. Plots are PNGs (the command
is printed at the foot of each figure); matplotlib is imported only when they are drawn (:mod:`.plots`).
"""

from __future__ import annotations

from pathlib import Path

from flopplan.fileio import atomic_write_json, atomic_write_text, writable_folder
from flopplan.race.curves import FIT_METHOD
from flopplan.race.plots import draw_all
from flopplan.race.results import ArmCurve, RaceAnalysis, TargetResult, rung_name
from flopplan.report.tables import Table, provenance, to_markdown
from flopplan.units import eng

RACE_JSON = "race.json"
REPORT_MD = "report.md"


def _r(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _iv(value: float | None, lo: float | None, hi: float | None) -> str:
    return "-" if value is None or lo is None or hi is None else f"{value:.3f} [{lo:.3f}, {hi:.3f}]"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _recommendations(a: RaceAnalysis) -> tuple[Table, list[str]]:
    level = f"{a.level:.0%}"
    table = Table("Recommendation per evaluation target",
                  ["target", "arm", "confidence", "at FLOPs", f"R [{level}]", f"gain R - R0 [{level}]", "P(best)",
                   "runner-up", f"margin [{level}]", "extrapolation", "regime at F"])
    notes = []
    for r in a.recommendations:
        table.rows.append([r.target, r.arm or "-", r.confidence, eng(r.at_flops), _iv(r.reward, r.lo, r.hi),
                           _iv(r.gain, r.gain_lo, r.gain_hi), _p(r.p_best), r.runner_up or "-",
                           _iv(r.margin, r.margin_lo, r.margin_hi), _x(r.extrapolation), r.regime])
        for reason in r.reasons:
            notes.append(f"{r.target}: {reason}")
        if r.p_best is not None and r.p_best_curves is not None and r.p_best_seen is not None:
            budgets = a.target(r.target).budgets
            decided = budgets[-1].decision.p_best_of.get(r.arm or "") if budgets else None
            pooled = r.confidence == "cannot tell" and r.p_best_anchored is not None
            finalist = any(arm.info.name == r.arm and arm.survived for arm in a.arms)
            among = ("among the finalists" if finalist else
                     f"among {r.arm} (it did not reach the finalists' rung: read at its own largest pilot) and the "
                     "finalists")
            seen = (f"seen best there: {r.p_best_seen:.2f}" if finalist else
                    f"not seen there: {r.arm} did not run that rung")
            notes.append(f"{r.target}: P(best) {r.p_best:.2f} {among} (the comparable arms that reached "
                         "the top rung): " + (f"as the evidence cannot tell, the mean of the anchored forecast's "
                                              f"{r.p_best_anchored:.2f} and the curves' own among the same arms, "
                                              f"{r.p_best_curves:.2f}; the anchored: " if pooled else "") +
                         f"the reward seen at the largest pilot carried to {eng(r.flops)} by the "
                         f"curves' change ({seen}" + (
                             ")" if pooled else f"; the curves alone at {eng(r.flops)}: {r.p_best_curves:.2f})") + (
                             f"; among every comparable arm, the eliminated ones' wide intervals included (what "
                             f"'cannot tell' reads): {decided:.2f}" if decided is not None else "")
                         + ". What changes only after the largest pilot is in no pilot: arms that meet or cross "
                           "only after it, which no stated P(best) can follow (docs/results.md, rounds 9 and 29)")
        if r.naive_arm is not None:
            notes.append(f"{r.target}: the naive pick (best observed at the largest pilot): {r.naive_arm} "
                         f"({r.naive_reward:.3f})" + (f"; RACE differs: {r.naive_note}" if r.naive_note and
                                                       r.naive_arm != r.arm else ""))
        notes.append(f"{r.target}: validating run of {r.arm or '-'} at the target budget {eng(r.flops)}"
                     + (f" (its upfront {eng(r.upfront_flops)} included)" if r.upfront_flops else "")
                     + f"; budget left after the pilots: {eng(r.budget_left_flops)}; intervals: {r.interval}")
        if r.arm and r.horizon:  # recorded since race.json held the pilots' cost
            notes.append(f"{r.target}: the validating run continues {r.arm}'s first-seed pilot "
                         f"({eng(r.continued_flops)}); pilot overhead (the pilots not continued, and a reward model "
                         f"{r.arm} does not use) {eng(r.overhead_flops)} = {r.overhead_share:.1%} of F; horizon: F is "
                         f"{r.horizon:.1f}x the arm's largest pilot")
    table.notes = [_cell(n) for n in notes]
    return table, notes


def _regimes(t: TargetResult, level: float, rungs: int) -> Table:
    table = Table(f"Regime by budget: {t.name}", ["budget", "FLOPs", "regime", "best", "P(best)", "runner-up",
                                                   f"margin [{level:.0%}]", "noise", "rule that decided it"])
    for b in t.budgets:
        d = b.decision
        table.rows.append([b.shown(rungs), eng(b.flops), d.regime, d.best or "-", _p(d.p_best), d.runner_up or "-",
                           _iv(d.margin, d.margin_lo, d.margin_hi), _r(d.noise), _cell(d.rule)])
    comps = [f"{b.shown(rungs)}: {c.axis} {c.best_value} -> {c.neighbour_value} ({c.neighbour}) costs {c.cost:.3f} "
             f"({c.names})" for b in t.budgets for c in b.decision.comparisons]
    table.notes = comps or ["no one-axis comparison at any budget"]
    return table


def _predictions(t: TargetResult, level: float, rungs: int) -> Table:
    table = Table(f"Predicted reward per arm and budget: {t.name}",
                  ["arm", "budget", "ledger FLOPs", f"R [{level:.0%}]", f"gain [{level:.0%}]", "P(best)",
                   "extrapolation", "observed", "usable"])
    for b in t.budgets:
        for p in b.predictions:
            table.rows.append([p.arm, b.shown(rungs), eng(p.ledger_flops), _iv(p.reward, p.lo, p.hi),
                               _iv(p.gain, p.gain_lo, p.gain_hi), _p(p.p_best), _x(p.extrapolation),
                               _r(p.observed), "yes" if p.usable else f"no: {p.note}"
                               + ("; still a competitor" if p.comparable and not p.usable else "")])
    table.notes = ["ledger FLOPs = budget - the arm's upfront FLOPs; observed: seed mean of each seed's last "
                   "evaluation within [0.8, 1.05] x the ledger FLOPs; P(best) among the comparable arms at that budget"]
    return table


def _fit_cell(c: ArmCurve) -> list[str]:
    af = c.arm_fit
    if af is None:
        return ["-"] * 4
    f = af.fit
    return [f"{f.r0:.3f}", _iv(f.a, af.a_lo, af.a_hi), f"{f.b:.3g}", eng(f.f_mid)]


def _curves(t: TargetResult) -> Table:
    table = Table(f"Curves: {t.name}", ["arm", "seeds", "largest pilot", "R0", "A [interval]", "B", "F_mid",
                                        "identified", "R(F) all / w/o first", "power law alpha, R(F)",
                                        "max drop / its sd", "checks"])
    for c in t.curves:
        wf = c.without_first
        both = "-" if c.predicted_at_budget is None else (f"{c.predicted_at_budget:.3f} / "
                                                          + (f"{wf.predicted_at_budget:.3f}" if wf else "-"))
        law = c.power_law
        law_cell = f"{law.law.alpha:.3g}, {law.predicted_at_budget:.3f}" if law else "-"
        env = c.envelope
        env_cell = f"{env.check.max_drop:.3f} / {env.noise_sd:.3f}" if env else "-"
        status = "ok" if c.fitted and not c.checks_failed else "; ".join(c.checks_failed)
        table.rows.append([c.arm, str(c.n_seeds), eng(c.max_flops), *_fit_cell(c), "yes" if c.identified else "no",
                           both, law_cell, env_cell, _cell(status)])
    table.notes = [f"fit: {FIT_METHOD}; w/o first: refit without the first positive evaluation of each seed",
                   "A interval: bootstrap percentile; identified: neither the point fit nor its interval reaches "
                   "the top of the A or F_mid grid, and F_mid lies within the data (otherwise no extrapolation)",
                   "power law: R = R0 + c F^alpha on the points above R0 (a check: fitted early it runs to R = 1)",
                   "max drop: the seed-mean curve's largest fall below its running best; the check fails above 3 sd"]
    return table


def _holdout(t: TargetResult, level: float) -> tuple[Table, str]:
    table = Table(f"Temporal holdout: {t.name}", ["arm", "fitted up to", "held-out points", "mean abs error",
                                                  "errors (observed - predicted)", "coverage", "consistency", "note"])
    for h in t.holdout:
        errs = ", ".join(f"{p.error:+.3f}" for p in h.points) or "-"
        table.rows.append([h.arm, eng(h.split_flops) if h.split_flops else "-", str(len(h.points)),
                           _r(h.mean_abs_error), errs, _p(h.coverage), _p(h.consistency),
                           _cell(h.reason) if not h.ok else ("A unidentified on the half" if not h.identified else "")])
    s = t.holdout_summary
    if s is None:
        text = "No surviving arm could be held out (it needs aligned seeds, >= 3 positions to fit and 1 to predict)."
    else:
        text = (f"Over {s.n_points} held-out points of {s.n_arms} surviving arms: mean |error| {s.mean_abs_error:.3f} "
                f"(max {s.max_abs_error:.3f}), coverage {s.coverage:.2f}, consistency {s.consistency:.2f} (nominal "
                f"{level:.2f}). Method: {s.method}.")
    table.notes = [text]
    return table, text


def _held_out(a: RaceAnalysis) -> Table | None:
    others = [t for t in a.targets if not t.fitted]
    if not others:
        return None
    table = Table("Held-out evaluation targets (observed only, not fitted)",
                  ["target", "arm", "seeds", *(f"{rung_name(i, len(a.rung_budgets))} observed"
                                              for i in range(len(a.rung_budgets))),
                   "last evaluation"])
    for t in others:
        for c in t.curves:
            last = max((o for o in c.observations), key=lambda o: o.flops, default=None)
            table.rows.append([t.name, c.arm, str(c.n_seeds), *(_r(v) for v in c.observed_at_rungs),
                               f"{last.reward:.3f} at {eng(last.flops)}" if last else "-"])
    table.notes = ["observed at a rung: seed mean of each seed's last evaluation within [0.8, 1.05] x the rung budget "
                   "less the arm's upfront FLOPs; the validate step compares the recommendation on these targets"]
    return table


def _arms(a: RaceAnalysis) -> Table:
    keys = ["policy", "group_size", "iterations", "reward"]
    keys = [k for k in keys if any(k in arm.info.axes for arm in a.arms)]
    table = Table("Arms", ["arm", *keys, "parameters", "rollout", "learning", "feedback", "upfront", "reached",
                           "survived"])
    for arm in a.arms:
        info = arm.info
        table.rows.append([info.name, *(str(info.axes.get(k, "-")) for k in keys), f"{info.params:,}",
                           *(f"{info.split.get(b, 0.0):.1%}" for b in ("rollout", "learning", "feedback")),
                           eng(info.upfront_flops), rung_name(arm.reached, len(a.rung_budgets)),
                           "yes" if arm.survived else "no"])
    table.notes = [f"varying axes: {', '.join(a.axes) or 'none'}; FLOP shares by bucket from each arm's ledger split"]
    return table


def render_markdown(analysis: RaceAnalysis, plots: list[str] | None = None) -> str:
    """report.md of ``analysis``; ``plots``: the PNG names written beside it (listed at the end)."""
    a = analysis
    intro = ["# RACE analysis", "", a.statement, "",
             f"Target budget F = {eng(a.budget_flops)}; the pilots spent {eng(a.pilot_flops)} "
             f"({a.pilot_share:.1%} of F); left for the validating run: {eng(a.budget_left_flops)}. Rungs: "
             + ", ".join(f"{i}: {eng(r)}" for i, r in enumerate(a.rung_budgets, 1))
             + f". {len(a.arms)} arms; {a.n_replicates} bootstrap replicates, {a.level:.0%} intervals, seed {a.seed}; "
             f"fitted targets: {', '.join(a.fitted_targets)}.", ""]
    tables = [_recommendations(a)[0]]
    for t in a.targets:
        if not t.fitted:
            continue
        rungs = len(a.rung_budgets)
        tables += [_regimes(t, a.level, rungs), _predictions(t, a.level, rungs), _curves(t), _holdout(t, a.level)[0]]
        if t.warnings:
            tables.append(Table(f"Warnings: {t.name}", ["warning"], [[_cell(w)] for w in t.warnings]))
    held = _held_out(a)
    if held is not None:
        tables.append(held)
    tables.append(_arms(a))
    for table in tables:
        table.align = "l" * len(table.columns)
    body = to_markdown(tables, a.command)
    rules = ["## Regime rules", "", *(f"{i}. {r}" for i, r in enumerate(a.rules, 1)), ""]
    how = ["## How the intervals were computed, and what they do not cover", "",
           *(f"- {t.name}: {t.interval_method}" for t in a.targets if t.fitted), f"- {a.not_covered}", ""]
    files = ["## Files", "", f"- {RACE_JSON}: everything above as data (race_version {a.race_version})",
             *(f"- {p}" for p in plots or []), f"- regenerate: `{a.command}`", ""]
    header, rest = body.split("\n", 1)
    return "\n".join([header, "", *intro, rest.strip(), "", *rules, *how, *files]).rstrip() + "\n"


def write_outputs(analysis: RaceAnalysis, folder: str | Path, *, plots: bool = True) -> list[Path]:
    """Write race.json, report.md and (``plots``) the PNGs into ``folder``, each atomically; returns the paths.
    The header of each records the command (race.json: its ``command`` key; report.md: its first line). An earlier
    analysis's race.json and report.md are removed first and race.json is written last, so a kill midway never
    leaves the two saying different things: race.json (what ``race validate`` reads) is there only when its
    report is."""
    out = writable_folder(folder, "RACE output folder")
    for name in (RACE_JSON, REPORT_MD):
        if (out / name).is_file() and not (out / name).is_symlink():  # (anything else: refused when written)
            (out / name).unlink()
    drawn: list[Path] = []
    if plots:
        drawn = draw_all(analysis, out)
    report = atomic_write_text(out / REPORT_MD, render_markdown(analysis, [p.name for p in drawn]))
    return [atomic_write_json(out / RACE_JSON, analysis.to_data()), report, *drawn]


__all__ = ["RACE_JSON", "REPORT_MD", "provenance", "render_markdown", "write_outputs"]
