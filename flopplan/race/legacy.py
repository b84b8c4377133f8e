"""race.json versions 1 to 5 read as version 6: :func:`upgrade` rewrites the data before the strict reader sees it.

Version 1 copied fields out of the compute types (a point fit, a power-law check, an envelope check, a decision,
an arm's info); version 2 holds the types themselves. Every value version 1 recorded is kept. What it did not record
is filled as follows, so a version-1 race still reports and validates:

* a curve fit's grid flags: all False except A's (``a_at_upper_edge``, ``a_at_grid_edge``), set when the fit was
  not identified although its F_mid lies within the data (so ``CurveFit.identified`` keeps its recorded value);
  ``f_max``: the arm's largest pilot FLOPs; ``a_step``: the default A grid step; ``f_mid_grid``: empty;
* the envelope check's points: empty (not recorded); a power law's R0: the ScaleRL fit's (the one it was fitted with);
* a decision's ``p_best_of`` from the predictions, its ``top`` (the highest prediction among the arms not set aside)
  and ``top_unidentified`` (that arm comparable but not usable) from the predictions' notes, as the rules derive them;
* a held-out point's ``position``: its index among the arm's aligned evaluation positions (the held-out ones last).
"""

from __future__ import annotations

from typing import Any

from flopplan.errors import UserError
from flopplan.race.curves import A_STEP, FIT_METHOD

SET_ASIDE = ("the upfront FLOPs exceed the budget", "eliminated at rung")  # version 1's notes of an arm set aside


def upgrade(data: dict[str, Any], where: str) -> dict[str, Any]:
    """Version 1 to 6 data as version 7 data; a malformed version 1 file is one UserError line. Versions 3 to 7
    added fields with defaults (3: a curve's model average, a recommendation's tie, cost to separate it and the
    naive pick; 4: beside a recommendation's P(best), the curves' own and the share of draws in which it is seen
    best at the largest pilot; 5: in a curve's model average, the acceleration test's share and reach; 6: the fall
    test's share, and the steep-fall family among the model average's families; 7: the anchored P(best) beside the
    stated one, which under "cannot tell" is now the mean of the anchored and the curves' own), so a version 2 to 6
    file reads as it is: those fields keep their defaults (none recorded), and its P(best) is what it stated then."""
    if data.get("race_version") in (2, 3, 4, 5, 6):
        return data | {"race_version": 7}
    try:
        arms = [{"info": {k: a[k] for k in ("name", "axes", "params", "split", "upfront_flops")},
                 "reached": a["reached"], "survived": a["survived"]} for a in data["arms"]]
        targets = [_target(t) for t in data["targets"]]
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise UserError(f"{where}: a malformed race.json version 1 ({type(exc).__name__}: {exc})") from None
    return data | {"race_version": 7, "arms": arms, "targets": targets}


def _target(t: dict[str, Any]) -> dict[str, Any]:
    curves = {c["arm"]: c for c in t["curves"]}
    return t | {"curves": [_curve(c) for c in t["curves"]], "budgets": [_budget(b) for b in t["budgets"]],
                "holdout": [_holdout(h, curves.get(h["arm"])) for h in t["holdout"]]}


def _fit(fit: dict[str, Any], f_max: float) -> dict[str, Any]:
    unbent = not fit["identified"] and fit["f_mid"] <= f_max
    return {**{k: fit[k] for k in ("a", "b", "f_mid", "r0", "sse", "n_points")}, "a_at_grid_edge": unbent,
            "f_mid_at_grid_edge": False, "a_at_upper_edge": unbent, "f_mid_at_upper_edge": False,
            "b_at_grid_edge": False, "a_step": A_STEP, "f_mid_grid": [], "f_max": f_max,
            "dropped_first": fit["dropped_first"], "method": FIT_METHOD}


def _curve(c: dict[str, Any]) -> dict[str, Any]:
    kept = ("arm", "reason", "n_seeds", "max_flops", "noise", "noise_method", "observations", "observed_at_rungs",
            "stable", "checks_failed", "without_first_reason", "power_law_reason")
    out = {k: c[k] for k in kept}
    env = c["envelope"]
    out["envelope"] = None if env is None else {
        "curve": env["curve"], "noise_sd": env["noise_sd"], "monotone": env["monotone"],
        "check": {"flops": [], "rewards": [], "envelope": [], "max_drop": env["max_drop"],
                  "flops_at_max_drop": env["flops_at_max_drop"], "peak_flops": env["peak_flops"]}}
    fit, wf, law = c["fit"], c["without_first"], c["power_law"]
    if fit is None:
        return out | {"arm_fit": None, "predicted_at_budget": None, "without_first": None, "power_law": None,
                      "band": None}
    shares = ("a_lo", "a_hi", "a_upper_edge_share", "f_mid_upper_edge_share", "identified", "n_seeds",
              "max_flops", "seed_scheme", "seed_factor")
    out["arm_fit"] = {"name": c["arm"], "fit": _fit(fit, c["max_flops"]), **{k: c[k] for k in shares}}
    out["predicted_at_budget"] = fit["predicted_at_budget"]
    out["without_first"] = None if wf is None else {"fit": _fit(wf, c["max_flops"]),
                                                    "predicted_at_budget": wf["predicted_at_budget"]}
    out["power_law"] = None if law is None else {
        "law": {**{k: law[k] for k in ("c", "alpha", "sse", "n_used", "n_excluded", "f_at_ceiling")},
                "r0": fit["r0"]},
        "scalerl_sse": law["scalerl_sse"], "predicted_at_budget": law["predicted_at_budget"]}
    out["band"] = {"flops": c["band_flops"], "point": c["band_point"], "lo": c["band_lo"], "hi": c["band_hi"]}
    return out


def _budget(b: dict[str, Any]) -> dict[str, Any]:
    preds = b["predictions"]
    play = [p for p in preds if not p["note"].startswith(SET_ASIDE)]
    top = max(play, key=lambda p: p["reward"]) if play else None  # max keeps the first of equals, as decide does
    kept = ("regime", "rule", "best", "runner_up", "p_best", "margin", "margin_lo", "margin_hi", "noise",
            "comparisons")
    decision = {**{k: b[k] for k in kept}, "p_best_of": {p["arm"]: p["p_best"] for p in preds},
                "top": None if top is None else top["arm"],
                "top_unidentified": top is not None and top["comparable"] and not top["usable"]}
    return {"label": b["label"], "flops": b["flops"], "predictions": preds, "decision": decision}


def _holdout(h: dict[str, Any], curve: dict[str, Any] | None) -> dict[str, Any]:
    points = h["points"]
    observations = curve["observations"] if curve is not None else []
    if not points or not observations:
        return h
    seed = observations[0]["seed"]
    first = sum(1 for o in observations if o["seed"] == seed and o["flops"] > 0) - len(points)
    return h | {"points": [p | {"position": first + j} for j, p in enumerate(points)]}
