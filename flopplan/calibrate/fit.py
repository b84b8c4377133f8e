"""Fitting the time model of each kind of work to timed calls (torch-free: numpy and scipy).

Least squares on log time (relative errors), parameters kept positive through their logs, a random 25 % of the
points held out and never used for the fit; the held-out errors are what the calibration report states.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from typing import Any

from flopplan.timing import PARAMETERS, Call, call_seconds, roofline_seconds, saturating_seconds

KIND_FORM = {"train": "saturating", "forward": "saturating", "prefill": "saturating", "decode": "roofline"}
SEED_SMALL = 0.3
"""Starting overheads: 30 % of the fastest call (then split per layer), a point below every measured time."""
SEED_ATTENTION = 4.0
"""Starting attention throughput: a quarter of the best dense rate (attention runs at a lower rate than GEMMs)."""


@dataclass
class Measurement:
    model: str
    kind: str
    batch: int
    prompt: int
    completion: int
    flops: float
    tokens: float
    weight_elements: float
    kv_elements: float
    seconds: float
    layers: int = 1
    attention_flops: float = 0.0
    repeats: list[float] = field(default_factory=list)

    def call(self) -> Call:
        return Call(self.flops, self.tokens, self.weight_elements, self.kv_elements, self.layers,
                    self.attention_flops)


def _predict(kind: str, params: dict[str, float], ms: list[Measurement], bytes_per_element: float) -> list[float]:
    return [call_seconds(KIND_FORM[kind], params, m.call(), bytes_per_element) for m in ms]


def fit_kind(kind: str, train: list[Measurement], bytes_per_element: float) -> dict[str, float]:
    """Least squares on log time (relative errors), parameters kept positive through their logs."""
    import numpy as np
    from scipy.optimize import least_squares

    flops = np.array([m.flops for m in train])
    seconds = np.array([m.seconds for m in train])
    layers = np.array([float(m.layers) for m in train])
    small = min(seconds) * SEED_SMALL
    if KIND_FORM[kind] == "saturating":
        tokens = np.array([m.tokens for m in train])
        attention = np.array([m.attention_flops for m in train])
        rate = max(flops / seconds)
        x0 = [math.log(rate), math.log(float(np.median(tokens))), math.log(small), math.log(small / max(layers)),
              math.log(rate / SEED_ATTENTION)]

        def model(theta: Any) -> Any:
            params = dict(zip(PARAMETERS["saturating"], np.exp(theta), strict=True))
            return saturating_seconds(params, flops, tokens, layers, attention)
    else:
        elements = np.array([m.weight_elements + m.kv_elements for m in train])
        x0 = [math.log(max(flops / seconds)), math.log(max(elements * bytes_per_element / seconds)),
              math.log(small), math.log(small / max(layers))]

        def model(theta: Any) -> Any:
            params = dict(zip(PARAMETERS["roofline"], np.exp(theta), strict=True))
            return roofline_seconds(params, flops, elements, layers, bytes_per_element)

    result = least_squares(lambda th: np.log(model(th)) - np.log(seconds), x0, method="trf", max_nfev=20000)
    return {name: float(v) for name, v in zip(PARAMETERS[KIND_FORM[kind]], np.exp(result.x), strict=True)}


def simple_rates(time_model: dict[str, dict[str, Any]], observed: dict[str, float] | None = None
                 ) -> tuple[float, dict[str, float]]:
    """A profile's ``peak_flops`` and efficiency by kind, the interface for readers that ignore the time model: each
    kind's best measured rate (FLOPs / seconds) where ``observed`` has it, else its fitted rate, at most
    :data:`flopplan.hardware.MAX_RATE`. A fitted rate can drift where the measurements do not identify it (times
    that barely grow with FLOPs on a busy machine): a quick CPU calibration wrote a peak of 1.6e18 FLOP/s, which
    the profile reader refuses, and the test that read it back failed on a loaded machine."""
    from flopplan.hardware import MAX_RATE

    fitted = {k: m.get("throughput_max", m.get("throughput", 0.0)) for k, m in time_model.items()}
    rates = {k: min((observed or {}).get(k) or v, MAX_RATE) for k, v in fitted.items()}
    peak = max(rates.values(), default=1.0) or 1.0
    return peak, {k: (rates[k] / peak if rates.get(k) else 1.0) for k in KIND_FORM}


def _errors(kind: str, params: dict[str, float], group: list[Measurement], bytes_per_element: float) -> list[float]:
    predicted = _predict(kind, params, group, bytes_per_element)
    return [p / m.seconds - 1 for p, m in zip(predicted, group, strict=True)]


def holdout_indices(measurements: list[Measurement], holdout: float = 0.25, seed: int = 0) -> set[int]:
    """The points held out of each kind's fit: a random ``holdout`` share (at least 2) of each kind, by index."""
    rng = random.Random(seed)
    held: set[int] = set()
    for kind in KIND_FORM:
        indices = [i for i, m in enumerate(measurements) if m.kind == kind]
        if len(indices) < 4:
            continue
        order = list(range(len(indices)))
        rng.shuffle(order)
        n_hold = max(2, round(holdout * len(indices)))
        held |= {indices[i] for i in order[:n_hold]}
    return held


def fit(measurements: list[Measurement], bytes_per_element: float, holdout: float = 0.25,
        seed: int = 0) -> dict[str, dict[str, Any]]:
    """Fit each kind on a random 75 %, report the error on the held-out 25 % (never used for the fit)."""
    held = holdout_indices(measurements, holdout, seed)
    out: dict[str, dict[str, Any]] = {}
    for kind in KIND_FORM:
        ms = [(i, m) for i, m in enumerate(measurements) if m.kind == kind]
        if len(ms) < 4:
            continue
        train = [m for i, m in ms if i not in held]
        test = [m for i, m in ms if i in held]
        params = fit_kind(kind, train, bytes_per_element)
        train_err = _errors(kind, params, train, bytes_per_element)
        test_err = _errors(kind, params, test, bytes_per_element)
        out[kind] = {
            "form": KIND_FORM[kind], **params,
            "points": len(ms), "fit_points": len(train), "heldout_points": len(test),
            "fit_residuals": [round(e, 4) for e in train_err],
            "heldout_errors": [round(e, 4) for e in test_err],
            "heldout_error": {"median": round(statistics.median(abs(e) for e in test_err), 4),
                              "mean": round(statistics.fmean(abs(e) for e in test_err), 4),
                              "max": round(max(abs(e) for e in test_err), 4)},
        }
    return out
