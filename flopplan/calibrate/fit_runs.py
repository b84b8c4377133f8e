"""Fitting a profile's time model to real runs (torch-free: numpy and scipy).

Two fits, on the observations of :mod:`flopplan.calibrate.runs`:

* **phases**: the time model of each kind of work, in the sweep's forms (:mod:`flopplan.timing`: saturating
  compute for train, forward and prefill; a roofline plus per-step overheads for decode), fitted jointly on the
  ledger's units. A unit is a sum of calls, of one kind or of two (a ``generate`` is a prefill and its decode
  steps), so every kind is fitted at once: least squares on the log of each unit's seconds (relative errors),
  parameters kept positive through their logs, pulled towards a starting point by a weak prior
  (:data:`PRIOR_WEIGHT`), so that a parameter the runs cannot tell apart from another (per-call against per-layer
  overhead when every run has the same depth) stays where the base profile, or the seed, put it.
* **outside the phases**: a step's wall time minus its phase seconds, linear in the coefficients of
  :data:`flopplan.timing.NON_PHASE_TERMS` (a round, its optimizer steps, an evaluation, a checkpoint), fitted by
  non-negative least squares on every step, each weighted by its run's typical step, so every run counts alike;
  then the start-up on each process's start to its first line, less that line's own work. A coefficient is fitted
  only when the runs vary its feature independently of those already fitted (:data:`INDEPENDENT`); otherwise it
  keeps the base profile's value (0 without one), and the fit says so.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from flopplan.calibrate.fit import KIND_FORM
from flopplan.calibrate.runs import (
    FITTED_TERMS,
    RunTiming,
    TimedStep,
    TimedUnit,
    coefficient_names,
    design_row,
)
from flopplan.timing import NON_PHASE_TERMS, PARAMETERS, roofline_seconds, saturating_seconds

PRIOR_WEIGHT = 0.05
"""Weight of each log-parameter's pull towards its starting point, against a weight of 1 per unit's log-time
residual: a parameter the data determine moves freely (a factor e away costs as much as a 5 % error on one unit);
one they do not stays put."""
INDEPENDENT = 0.05
"""A coefficient is fitted when its feature column is not (nearly) a combination of those already fitted: more
than this share of its length lies outside their span (a variance inflation below 1 / 0.05^2 = 400)."""
MIN_SPREAD = 4.0
"""A coefficient per unit of a feature (per rollout, per byte, per parameter) is fitted only when the runs span
that feature by at least this factor: over a narrower range it cannot be told from the fixed cost it rides on,
and its noise would be extrapolated to every larger run."""
PRIORITY = ("round.seconds", "optimizer_step.seconds", "evaluation.seconds", "checkpoint.seconds", "startup.seconds",
            "round.seconds_per_rollout", "optimizer_step.seconds_per_byte", "round.seconds_per_scored_rollout",
            "startup.seconds_per_parameter", "round.seconds_per_token", "checkpoint.seconds_per_byte",
            "evaluation.seconds_per_prompt", "optimizer_step.seconds_per_tensor")
"""The order in which coefficients enter the fit, each only if the runs tell it apart from those before it: the
fixed costs, then what grows with a run's size (rollouts, optimizer traffic, reward-model rows, models loaded),
then refinements (tokens, checkpoint and eval sizes, tensor counts)."""
NEGLIGIBLE = 1e-7
"""Seconds below which a fitted term's largest contribution to any step is taken as 0 (the solver's bound)."""
SEED_OVERHEAD = 1e-3
SEED_OVERHEAD_LAYER = 1e-4
SEED_BANDWIDTH = 1e10
SEED_ATTENTION = 4.0  # the seed attention rate: a quarter of the dense one (as the sweep's fit starts)
SEED_ADAPTER = 4.0  # the seed LoRA adapter rate: a quarter of the dense one
SEED_ADAPTER_TOKEN_LAYER = 1e-6  # the seed of the adapters' work per token and layer: a microsecond
ADAPTER_SPREAD = 0.1
"""The adapters' share of a kind's FLOPs must vary by this much (relative to its largest) over the calls that run
adapters for the fit to give the adapters' FLOPs their own rate."""


@dataclass
class _Calls:
    """Every call of one kind, flattened (a decode call's steps one by one), with the unit each belongs to."""

    unit: list[int] = field(default_factory=list)
    flops: list[float] = field(default_factory=list)
    tokens: list[float] = field(default_factory=list)
    layers: list[float] = field(default_factory=list)
    attention: list[float] = field(default_factory=list)
    elements: list[float] = field(default_factory=list)
    adapter: list[float] = field(default_factory=list)

    def add(self, index: int, call: Any) -> None:
        import numpy as np

        flops = np.atleast_1d(np.asarray(call.flops, dtype=float))
        n = flops.size
        kv = np.broadcast_to(np.asarray(call.kv_elements, dtype=float), (n,))
        attention = np.broadcast_to(np.asarray(call.attention_flops, dtype=float), (n,))
        self.unit += [index] * n
        self.flops += flops.tolist()
        self.tokens += [float(call.tokens)] * n
        self.layers += [float(call.layers)] * n
        self.attention += attention.tolist()
        self.elements += (float(call.weight_elements) + kv).tolist()
        self.adapter += np.broadcast_to(np.asarray(call.adapter_flops, dtype=float), (n,)).tolist()

    def arrays(self) -> dict[str, Any]:
        import numpy as np

        return {k: np.asarray(getattr(self, k), dtype=float if k != "unit" else int)
                for k in ("unit", "flops", "tokens", "layers", "attention", "elements", "adapter")}


def kind_seconds(kind: str, params: dict[str, float], a: dict[str, Any], bytes_per_element: float) -> Any:
    """Seconds of each flattened call of ``kind`` (arrays of :class:`_Calls`)."""
    if KIND_FORM[kind] == "saturating":
        return saturating_seconds(params, a["flops"], a["tokens"], a["layers"], a["attention"], a["adapter"])
    return roofline_seconds(params, a["flops"], a["elements"], a["layers"], bytes_per_element, a["adapter"],
                            a["tokens"])


def seed_parameters(kind: str, a: dict[str, Any], seconds: float) -> dict[str, float]:
    """A starting point from the data alone: the kind's FLOPs over all the time of the units it runs in (a
    lower bound of its rate), the median tokens in flight, small fixed costs."""
    rate = max(float(a["flops"].sum()) / max(seconds, 1e-9), 1e6)
    if KIND_FORM[kind] == "saturating":
        tokens = float(statistics.median(a["tokens"].tolist()))
        return {"throughput_max": 2 * rate, "tokens_half": max(tokens, 1.0), "overhead": SEED_OVERHEAD,
                "overhead_layer": SEED_OVERHEAD_LAYER, "attention_throughput": 2 * rate / SEED_ATTENTION,
                "adapter_throughput": 2 * rate / SEED_ADAPTER, "adapter_token_layer": SEED_ADAPTER_TOKEN_LAYER}
    return {"throughput": 2 * rate, "bandwidth": SEED_BANDWIDTH, "overhead": SEED_OVERHEAD / 10,
            "overhead_layer": SEED_OVERHEAD_LAYER / 10, "adapter_throughput": 2 * rate / SEED_ADAPTER,
            "adapter_token_layer": SEED_ADAPTER_TOKEN_LAYER}


def fitted_parameters(kind: str, a: dict[str, Any]) -> tuple[str, ...]:
    """The parameters of ``kind`` the fit moves: its form's; the adapters' work per token and layer when some of
    its calls run adapters and some do not (LoRA and full runs, or the reference's adapter-free pass beside the
    policy's); and the adapters' own FLOP rate when their share of the FLOPs varies over the calls that run them
    (several ranks or targets; :data:`ADAPTER_SPREAD`): a constant share cannot be told from the dense rate, nor
    from the work per token."""
    share = a["adapter"] / a["flops"]
    active = share[share > 0]
    mixed = 0 < active.size < share.size
    varied = active.size > 0 and float(active.max() - active.min()) > ADAPTER_SPREAD * float(active.max())
    return PARAMETERS[KIND_FORM[kind]] + (("adapter_token_layer",) if mixed else ()) + (
        ("adapter_throughput",) if varied else ())


@dataclass
class PhaseFit:
    time_model: dict[str, dict[str, Any]]  # kind -> {"form", parameters}
    fitted_kinds: list[str]  # kinds with calls in the runs (the others come from the base profile or a kin)
    unit_errors: dict[str, dict[str, float]]  # unit -> median / max relative error of the fitted units
    tokens: dict[str, list[float]]  # kind -> [fewest, most] tokens in flight per call fitted on
    predicted: dict[tuple[str, int], float]  # (run, step) -> predicted seconds of its phase calls
    notes: list[str] = field(default_factory=list)
    # unit -> median / max relative error of each run's units predicted by a fit on the other runs (None: one run)
    held_out_errors: dict[str, dict[str, float]] | None = None
    # kind -> parameter -> "identified", "at its start" or "not identified" (:func:`_identified`)
    identified: dict[str, dict[str, str]] = field(default_factory=dict)


def units_seconds(units: list[TimedUnit], time_model: dict[str, dict[str, Any]],
                  bytes_per_element: float) -> list[float | None]:
    """Each unit's seconds as ``time_model`` prices its calls (None for a unit with a kind the model lacks)."""
    out: list[float | None] = []
    for unit in units:
        if any(kind not in time_model for kind, _ in unit.calls):
            out.append(None)
            continue
        total = 0.0
        for kind, call in unit.calls:
            calls = _Calls()
            calls.add(0, call)
            total += float(kind_seconds(kind, time_model[kind], calls.arrays(), bytes_per_element).sum())
        out.append(total)
    return out


def leave_one_run_out(units: list[TimedUnit], bytes_per_element: float,
                      base: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, float]] | None:
    """The error of each run's units predicted by the model fitted on the other runs' units alone (held out:
    relative, absolute; per unit, the median and max over every run's units and how many), or None with fewer
    than two runs."""
    runs = sorted({u.run for u in units})
    if len(runs) < 2:
        return None
    by_unit: dict[str, list[float]] = {}
    for run in runs:
        held = [u for u in units if u.run == run]
        model = fit_phases([u for u in units if u.run != run], bytes_per_element, base, hold_out=False).time_model
        for unit, seconds in zip(held, units_seconds(held, model, bytes_per_element), strict=True):
            if seconds is not None:
                by_unit.setdefault(unit.unit, []).append(abs(seconds / unit.seconds - 1))
    return {u: {"median": statistics.median(e), "max": max(e), "units": len(e), "runs": len(runs)}
            for u, e in by_unit.items()}


def fit_phases(units: list[TimedUnit], bytes_per_element: float,
               base: dict[str, dict[str, Any]] | None = None, hold_out: bool = True) -> PhaseFit:
    """The time model of every kind of work, fitted jointly on the units of the runs; ``hold_out``: also the
    error of each run's units predicted by a fit on the other runs (:func:`leave_one_run_out`)."""
    import numpy as np
    from scipy.optimize import least_squares

    calls: dict[str, _Calls] = {}
    for i, unit in enumerate(units):
        for kind, call in unit.calls:
            calls.setdefault(kind, _Calls()).add(i, call)
    arrays = {kind: c.arrays() for kind, c in calls.items()}
    seconds = np.array([u.seconds for u in units])
    kinds = [k for k in KIND_FORM if k in arrays]
    names = {kind: fitted_parameters(kind, arrays[kind]) for kind in kinds}
    start: dict[str, dict[str, float]] = {}
    for kind in kinds:
        involved = np.unique(arrays[kind]["unit"])
        seed = seed_parameters(kind, arrays[kind], float(seconds[involved].sum()))
        known = (base or {}).get(kind)
        start[kind] = {p: float(known[p]) if known and known.get("form") == KIND_FORM[kind] and known.get(p)
                       else seed[p] for p in names[kind]}
    x0 = np.log(np.concatenate([[start[k][p] for p in names[k]] for k in kinds]))

    def unpack(theta: Any) -> dict[str, dict[str, float]]:
        out, at = {}, 0
        for kind in kinds:
            n = len(names[kind])
            out[kind] = dict(zip(names[kind], np.exp(theta[at:at + n]), strict=True))
            at += n
        return out

    def predicted(theta: Any) -> Any:
        params, total = unpack(theta), np.zeros(len(units))
        for kind in kinds:
            a = arrays[kind]
            total += np.bincount(a["unit"], weights=kind_seconds(kind, params[kind], a, bytes_per_element),
                                 minlength=len(units))
        return total

    counts: dict[str, int] = {}
    for u in units:
        counts[u.run] = counts.get(u.run, 0) + 1
    # every run weighs alike (a run's speed is shared by all its calls: other processes on the machine slow a whole
    # run, so a long run must not outvote the others), in units of a typical run's calls
    typical = statistics.median(counts.values())
    weight = np.sqrt(np.array([typical / counts[u.run] for u in units]))

    def residuals(theta: Any) -> Any:
        return np.concatenate([weight * (np.log(predicted(theta)) - np.log(seconds)), PRIOR_WEIGHT * (theta - x0)])

    result = least_squares(residuals, x0, method="trf", max_nfev=5000)
    params = unpack(result.x)
    identified = _identified(result, len(units), [(k, p) for k in kinds for p in names[k]], x0)
    errors = predicted(result.x) / seconds - 1
    time_model = {k: {"form": KIND_FORM[k], **params[k]} for k in kinds}
    notes = _fill_missing(time_model, base)
    by_unit: dict[str, list[float]] = {}
    per_step: dict[tuple[str, int], float] = {}
    for unit, error, p in zip(units, errors.tolist(), predicted(result.x).tolist(), strict=True):
        by_unit.setdefault(unit.unit, []).append(abs(error))
        per_step[(unit.run, unit.step)] = per_step.get((unit.run, unit.step), 0.0) + p
    return PhaseFit(time_model, kinds,
                    {u: {"median": statistics.median(e), "max": max(e), "units": len(e)} for u, e in by_unit.items()},
                    {k: [float(arrays[k]["tokens"].min()), float(arrays[k]["tokens"].max())] for k in kinds},
                    per_step, notes, leave_one_run_out(units, bytes_per_element, base) if hold_out else None,
                    identified)


IDENTIFIED = 0.5
"""A fitted parameter is identified by the runs when the fit pins its log within this standard error (a factor
e^0.5 ~ 1.65 either way), from the data alone: the Gauss-Newton covariance, residual variance x inverse of the
Jacobian's J^T J at the solution (the prior's rows left out, so what only the prior holds is not identified)."""


def _identified(result: Any, n_units: int, names: list[tuple[str, str]], x0: Any) -> dict[str, dict[str, str]]:
    """kind -> parameter -> "identified", or why not ("at its start": the data did not move it; "not identified":
    the data leave it free within more than :data:`IDENTIFIED`), from the least-squares result."""
    import numpy as np

    jac = np.asarray(result.jac)[:n_units]
    data = np.asarray(result.fun)[:n_units]
    variance = max(float(data @ data) / max(n_units - len(names), 1), 1e-6)
    info = jac.T @ jac
    out: dict[str, dict[str, str]] = {}
    for j, (kind, name) in enumerate(names):
        others = [i for i in range(len(names)) if i != j]
        # the information on parameter j once the others are fitted too (its Schur complement)
        conditional = info[j, j] - (info[j, others] @ np.linalg.pinv(info[np.ix_(others, others)]) @ info[others, j]
                                    if others else 0.0)
        std = math.sqrt(variance / conditional) if conditional > 0 else math.inf
        moved = abs(float(result.x[j] - x0[j])) > 1e-3
        out.setdefault(kind, {})[name] = ("identified" if std < IDENTIFIED and moved else
                                          "at its start" if not moved else "not identified")
    return out


KIN = {"forward": "prefill", "prefill": "forward", "train": "forward", "decode": None}
"""Where a kind the runs never ran takes its model from when no base profile has it: a no-grad scoring forward
and a prefill are the same compute-bound forward pass."""


def _fill_missing(time_model: dict[str, dict[str, Any]], base: dict[str, dict[str, Any]] | None) -> list[str]:
    notes = []
    for kind in KIND_FORM:
        if kind in time_model:
            continue
        if base and kind in base:
            time_model[kind] = dict(base[kind])
            notes.append(f"{kind}: no call of this kind in the runs; kept the base profile's model")
        elif KIN[kind] in time_model:
            time_model[kind] = dict(time_model[KIN[kind]])  # type: ignore[index]
            notes.append(f"{kind}: no call of this kind in the runs; took the {KIN[kind]} model (the same "
                         "compute-bound forward)")
    return notes


# -- outside the phases ------------------------------------------------------------------------------------------

@dataclass
class NonPhaseFit:
    coefficients: dict[str, dict[str, float]]  # term -> coefficient -> seconds per unit of its feature
    fitted: list[str]  # "term.coefficient" fitted on the runs (the others: the base profile's, or 0)
    notes: list[str] = field(default_factory=list)


def spread(column: Any) -> float:
    """How far a feature varies over the observations: its largest nonzero value over its smallest."""
    nonzero = column[column > 0]
    return float(nonzero.max() / nonzero.min()) if nonzero.size else 0.0


def independent_columns(columns: Any, order: list[int]) -> list[int]:
    """The columns (in ``order``) that each bring something new: the part of the column outside the span of those
    chosen before it is more than :data:`INDEPENDENT` of its length."""
    import numpy as np

    chosen: list[int] = []
    for j in order:
        column = columns[:, j]
        if not np.any(column):
            continue
        if chosen:
            basis = columns[:, chosen]
            fitted = basis @ np.linalg.lstsq(basis, column, rcond=None)[0]
            novelty = float(np.linalg.norm(column - fitted) / np.linalg.norm(column))
        else:
            novelty = 1.0
        if novelty > INDEPENDENT:
            chosen.append(j)
    return chosen


def _linear_fit(rows: list[list[float]], targets: list[float], weights: list[float],
                names: list[tuple[str, str]], base: dict[str, dict[str, float]]) -> tuple[dict[tuple[str, str], float],
                                                                                            list[tuple[str, str]]]:
    """Non-negative least squares of ``targets`` on the columns of ``rows`` that the data identify; the other
    coefficients are the base's (0 when it has none) and their share of the targets is taken off first."""
    import numpy as np
    from scipy.optimize import lsq_linear

    a, b, w = np.asarray(rows, dtype=float), np.asarray(targets, dtype=float), np.asarray(weights, dtype=float)
    rank = {name: i for i, name in enumerate(PRIORITY)}
    order = sorted(range(len(names)), key=lambda j: rank.get(f"{names[j][0]}.{names[j][1]}", len(PRIORITY)))
    order = [j for j in order if names[j][1] == "seconds" or spread(a[:, j]) >= MIN_SPREAD]
    chosen = independent_columns(a, order)
    value = {n: base.get(n[0], {}).get(n[1], 0.0) for n in names}
    rest = [j for j in range(len(names)) if j not in chosen]
    b = b - (a[:, rest] @ np.array([value[names[j]] for j in rest]) if rest else 0.0)
    if chosen:
        scale = np.linalg.norm(a[:, chosen] * w[:, None], axis=0)
        solution = lsq_linear(a[:, chosen] * w[:, None] / scale, b * w, bounds=(0, np.inf)).x / scale
        for j, v in zip(chosen, solution.tolist(), strict=True):  # a bound left at 0 reads as 0, not 1e-30
            value[names[j]] = float(v) if v * np.abs(a[:, j]).max() > NEGLIGIBLE else 0.0
    return value, [names[j] for j in chosen]


def fit_non_phase(runs: list[RunTiming], base: dict[str, dict[str, float]] | None = None) -> NonPhaseFit:
    """The coefficients of the time outside the phases: rounds, optimizer steps, evaluations and checkpoints on
    every step's wall time less its phase seconds; then the start-up."""
    base = base or {}
    names = coefficient_names()
    rows, targets, weights = [], [], []
    steps = statistics.median(len(run.rounds) for run in runs if run.rounds) if any(r.rounds for r in runs) else 1
    for run in runs:
        if not run.rounds:
            continue
        typical = statistics.median(r.wall_seconds for r in run.rounds)
        for r in run.rounds:  # relative to the run's typical step, and every run weighs alike
            rows.append(design_row(r.features))
            targets.append(r.outside_seconds)
            weights.append(math.sqrt(steps / len(run.rounds)) / max(typical, 1e-6))
    notes = []
    coefficients: dict[str, dict[str, float]] = {term: {} for term in NON_PHASE_TERMS}
    fitted: list[tuple[str, str]] = []
    if rows:
        values, fitted = _linear_fit(rows, targets, weights, names, base)
        for (term, name), v in values.items():
            coefficients[term][name] = v
    else:
        notes.append("no run has two consecutive timed steps: the time outside the phases is not fitted")
        for term in FITTED_TERMS:
            coefficients[term] = dict(base.get(term, {}))
    startups = [(s, run) for run in runs for s in run.startups]
    start_names = [("startup", n) for n in NON_PHASE_TERMS["startup"]]
    if startups:
        own = [own_work(s.first, coefficients) for s, _ in startups]
        values, start_fitted = _linear_fit([list(s.features) for s, _ in startups],
                                           [s.seconds - o for (s, _), o in zip(startups, own, strict=True)],
                                           [1.0 / max(s.seconds, 1e-6) for s, _ in startups], start_names, base)
        coefficients["startup"] = {name: values[("startup", name)] for name in NON_PHASE_TERMS["startup"]}
        fitted += start_fitted
    elif "startup" in base:
        coefficients["startup"] = dict(base["startup"])
        notes.append("no run records when its process started: kept the base profile's start-up")
    else:
        del coefficients["startup"]
        notes.append("no run records when its process started (runs of an older flopplan, or TRL's): the start-up "
                     "is not modelled")
    if "shutdown" in base:  # no run folder dates it (flopplan calibrate --probe-shutdown times it)
        coefficients["shutdown"] = dict(base["shutdown"])
    for term in [t for t, c in coefficients.items() if not c]:
        del coefficients[term]
    kept = [f"{t}.{n}" for t, n in names + start_names if (t, n) not in fitted and t in coefficients]
    if kept:
        notes.append("not identified by these runs (kept at the base profile's value, or 0): " + ", ".join(kept))
    return NonPhaseFit(coefficients, [f"{t}.{n}" for t, n in fitted], notes)


def outside_seconds(step: TimedStep, coefficients: dict[str, dict[str, float]]) -> float:
    """The modelled seconds outside the phases of one step (features already summed over occurrences)."""
    total = 0.0
    for term, features in step.features.items():
        total += sum(coefficients.get(term, {}).get(name, 0.0) * f
                     for name, f in zip(NON_PHASE_TERMS[term], features, strict=True))
    return total


def own_work(step: TimedStep, coefficients: dict[str, dict[str, float]]) -> float:
    """A step's own work: its phase seconds as measured, and the modelled time outside them."""
    return step.phase_seconds + outside_seconds(step, coefficients)


def startup_seconds(coefficients: dict[str, dict[str, float]], features: tuple[float, ...]) -> float:
    """The modelled start-up of one process (its features: :func:`flopplan.timing.non_phase_features`)."""
    return sum(coefficients.get("startup", {}).get(name, 0.0) * f
               for name, f in zip(NON_PHASE_TERMS["startup"], features, strict=True))

