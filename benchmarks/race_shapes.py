"""The truths of benchmarks/race_misspecification.py: each shape draws one arm's learning curve (a function from
FLOPs to the mean reward in [0, 1], R0 at 0 FLOPs) with random parameters; the largest pilot is at F_P and the
budget F at 2 F_P.

``FAMILIES`` are the issue's five (the sigmoid control, a delayed take-off, a log-linear rise that saturates late,
a rise then collapse, crossing sigmoids); ``HOLDOUT`` are shapes written to look for what RACE's rules miss and never
used to tune them (each comment says when it was written); :func:`add_shape` registers a user's own
(``--shape FILE.py:FUNCTION``; benchmarks/shapes_example.py gives the contract).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import expit

F_P = 1e20
RUNGS = (F_P / 4, F_P)
TARGET = 2 * F_P
EVALS = F_P / 4 * 2.0 ** np.arange(-4, 1)  # rung 0's evaluations; survivors add F_P/2 and F_P
MORE = np.array([F_P / 2, F_P])
Curve = Callable[[np.ndarray], np.ndarray]  # FLOPs -> mean reward


def sigmoid(r0: float, a: float, b: float, f_mid: float) -> Curve:
    return lambda f: r0 + (a - r0) * expit(b * (np.log(np.maximum(f, 1e-300)) - np.log(f_mid)))


def control(rng: np.random.Generator, r0: float) -> Curve:
    return sigmoid(r0, rng.uniform(0.45, 0.85), rng.uniform(1.0, 2.5), F_P * 2.0 ** rng.uniform(-4, 0))


def delayed(rng: np.random.Generator, r0: float) -> Curve:
    """A first rise that stalls, then (for some arms) a second take-off near or beyond the pilots."""
    first = sigmoid(0.0, rng.uniform(0.08, 0.25), rng.uniform(1.2, 2.5), F_P * 2.0 ** rng.uniform(-5, -3))
    g2, m2 = rng.uniform(0.0, 0.4) * (rng.random() < 0.6), F_P * 2.0 ** rng.uniform(-1, 1.5)
    second = sigmoid(0.0, g2, rng.uniform(1.5, 3.0), m2)
    return lambda f: r0 + first(f) + second(f)


def loglinear(rng: np.random.Generator, r0: float) -> Curve:
    """A straight line in ln F from F0 that saturates late (cap reached at F_cap in [F_P, 16 F_P])."""
    f0, f_cap, a = F_P * 2.0 ** rng.uniform(-8, -5), F_P * 2.0 ** rng.uniform(0, 4), rng.uniform(0.5, 0.9)

    def curve(f: np.ndarray) -> np.ndarray:
        t = np.clip(np.log(np.maximum(f, 1e-300) / f0) / np.log(f_cap / f0), 0, 1)
        return r0 + (a - r0) * (1 - (1 - t) ** 1.3)
    return curve


def collapse(rng: np.random.Generator, r0: float) -> Curve:
    """A sigmoid rise that (for some arms) collapses after F_c in [F_P/4, 4 F_P] by a share of its gain."""
    rise = sigmoid(0.0, rng.uniform(0.3, 0.6), rng.uniform(1.2, 2.5), F_P * 2.0 ** rng.uniform(-5, -2))
    depth, f_c = rng.uniform(0.2, 0.7) * (rng.random() < 0.6), F_P * 2.0 ** rng.uniform(-2, 2)
    return lambda f: r0 + rise(f) * (1 - depth * expit(2.5 * (np.log(np.maximum(f, 1e-300)) - np.log(f_c))))


def crossing(rng: np.random.Generator, r0: float) -> Curve:
    """Fast starters that saturate low against slow starters that reach higher: curves cross near the pilots."""
    if rng.random() < 0.5:
        return sigmoid(r0, rng.uniform(0.45, 0.6), rng.uniform(1.5, 2.5), F_P * 2.0 ** rng.uniform(-5, -3))
    return sigmoid(r0, rng.uniform(0.6, 0.85), rng.uniform(1.0, 1.8), F_P * 2.0 ** rng.uniform(-1, 1))


FAMILIES: dict[str, Callable[[np.random.Generator, float], Curve]] = {
    "control": control, "delayed": delayed, "loglinear": loglinear, "collapse": collapse, "crossing": crossing}


# Held-out shapes: never used to tune RACE's rules, run with --holdout-families and reported apart.
def gompertz(rng: np.random.Generator, r0: float) -> Curve:
    """A Gompertz rise in ln F: asymmetric, a long slow approach to A (the exponential saturation)."""
    a, b, f_m = rng.uniform(0.45, 0.85), rng.uniform(0.5, 1.5), F_P * 2.0 ** rng.uniform(-5, 1)
    return lambda f: r0 + (a - r0) * np.exp(-np.exp(np.minimum(-b * np.log(np.maximum(f, 1e-300) / f_m), 50.0)))


def late_rise(rng: np.random.Generator, r0: float) -> Curve:
    """A small early gain, a plateau, then (for some arms) a straight rise in ln F from F_l near the pilots."""
    first = sigmoid(0.0, rng.uniform(0.05, 0.3), rng.uniform(1.5, 3.0), F_P * 2.0 ** rng.uniform(-6, -4))
    slope, f_l = rng.uniform(0.03, 0.12) * (rng.random() < 0.5), F_P * 2.0 ** rng.uniform(-2, 1)
    return lambda f: np.minimum(r0 + first(f) + slope * np.maximum(np.log(np.maximum(f, 1e-300) / f_l), 0), 0.95)


def ceiling(rng: np.random.Generator, r0: float) -> Curve:
    """A power law in F that hits a hard ceiling (anywhere from the pilots to well beyond F)."""
    alpha, cap = rng.uniform(0.15, 0.5), rng.uniform(0.45, 0.9)
    f_cap = F_P * 2.0 ** rng.uniform(-2, 3)
    return lambda f: r0 + (cap - r0) * np.minimum((np.maximum(f, 0.0) / f_cap) ** alpha, 1.0)


def decline(rng: np.random.Generator, r0: float) -> Curve:
    """A sigmoid rise to a peak, then (for some arms) a slow straight decline in ln F after F_pk."""
    rise = sigmoid(0.0, rng.uniform(0.3, 0.6), rng.uniform(1.2, 2.5), F_P * 2.0 ** rng.uniform(-6, -2))
    rate, f_pk = rng.uniform(0.02, 0.08) * (rng.random() < 0.6), F_P * 2.0 ** rng.uniform(-3, 1)
    return lambda f: r0 + rise(f) - rate * np.maximum(np.log(np.maximum(f, 1e-300) / f_pk), 0)


# Written after round 6 of docs/results.md (2026-12-02), to look for what the rules miss; the dip led to the rule
# that the naive pick stays unless the intervals at F separate.
def exp_saturation(rng: np.random.Generator, r0: float) -> Curve:
    """An exponential approach to A in F (not ln F): a sharp bend, anywhere from well before to beyond the pilots."""
    a, f_s = rng.uniform(0.45, 0.85), F_P * 2.0 ** rng.uniform(-4, 3)
    return lambda f: r0 + (a - r0) * (1 - np.exp(-np.maximum(f, 0.0) / f_s))


def linear_in_f(rng: np.random.Generator, r0: float) -> Curve:
    """A straight rise in F itself up to a cap: accelerating in ln F, each doubling gains as much as all before."""
    slope, cap = rng.uniform(0.05, 0.4), rng.uniform(0.5, 0.9)
    return lambda f: np.minimum(r0 + slope * np.maximum(f, 0.0) / F_P, cap)


def double_sigmoid(rng: np.random.Generator, r0: float) -> Curve:
    """Two sigmoid rises in ln F, the second (up to 0.35) near or beyond the pilots."""
    first = sigmoid(0.0, rng.uniform(0.1, 0.3), 2.0, F_P * 2.0 ** rng.uniform(-5, -2))
    second = sigmoid(0.0, rng.uniform(0.0, 0.35), 2.0, F_P * 2.0 ** rng.uniform(-2, 2))
    return lambda f: r0 + first(f) + second(f)


def plateau(rng: np.random.Generator, r0: float) -> Curve:
    """Saturated before the first evaluation: the arms differ only by their plateaus."""
    return sigmoid(r0, rng.uniform(0.3, 0.8), 3.0, F_P * 2.0 ** rng.uniform(-7, -5))


def dip(rng: np.random.Generator, r0: float) -> Curve:
    """A sigmoid rise with a transient dip (up to 0.15, a Gaussian in ln F) near the pilots, then recovery."""
    rise = sigmoid(0.0, rng.uniform(0.3, 0.6), rng.uniform(1.5, 3.0), F_P * 2.0 ** rng.uniform(-5, -2))
    depth, f_d, w = rng.uniform(0.0, 0.15), F_P * 2.0 ** rng.uniform(-2, 1), rng.uniform(0.5, 1.0)
    return lambda f: r0 + rise(f) - depth * np.exp(-(np.log(np.maximum(f, 1e-300) / f_d) / w) ** 2)


# Written in round 8 (docs/results.md), after the acceleration test was measured on "linear-F": the same rise
# without the ceilings that hide where it stops, so that a mend for the capped shape is also seen where nothing caps.
def rise_in_f(rng: np.random.Generator, r0: float) -> Curve:
    """A straight rise in F with no ceiling below a pass rate of 1."""
    slope = rng.uniform(0.05, 0.4)
    return lambda f: np.minimum(r0 + slope * np.maximum(f, 0.0) / F_P, 1.0)


# Written in round 13 (docs/results.md), measured once and not tuned to: a sudden take-off, as abilities that
# appear at a scale, and a rise whose truth wobbles in ln F, as an unstable run's does.
def jump(rng: np.random.Generator, r0: float) -> Curve:
    """A sudden rise (a sigmoid of slope 6-12 in ln F, the control's 1-2.5) anywhere from early in the pilots to
    3x beyond them."""
    return sigmoid(r0, rng.uniform(0.45, 0.9), rng.uniform(6.0, 12.0), F_P * 2.0 ** rng.uniform(-4, 1.5))


def wobble(rng: np.random.Generator, r0: float) -> Curve:
    """The control's rise with a periodic wobble in ln F (amplitude up to 0.06, a period of 1-3 doublings, growing
    in with the first 0.1 of gain), so the truth itself is not monotone."""
    rise = control(rng, 0.0)
    amp, period, phase = rng.uniform(0.0, 0.06), np.log(2.0) * rng.uniform(1.0, 3.0), rng.uniform(0, 2 * np.pi)
    return lambda f: np.clip(r0 + rise(f) + amp * np.sin(2 * np.pi * np.log(np.maximum(f, 1e-300) / F_P) / period
                                                         + phase) * np.minimum(rise(f) / 0.1, 1.0), 0.0, 1.0)


# Written in round 15 (docs/results.md), measured once and not tuned to: shapes of learning curves from the
# scaling literature that no earlier shape has, and a grid whose arms follow different laws.
def power_in_f(rng: np.random.Generator, r0: float) -> Curve:
    """A power law in F with no ceiling below a pass rate of 1: R0 + c (F / F_P)^alpha, alpha 0.1-0.5 (a straight
    rise in F has alpha 1)."""
    c, alpha = rng.uniform(0.1, 0.5), rng.uniform(0.1, 0.5)
    return lambda f: np.minimum(r0 + c * (np.maximum(f, 0.0) / F_P) ** alpha, 1.0)


def logistic_in_f(rng: np.random.Generator, r0: float) -> Curve:
    """A logistic in F itself (not ln F), centred anywhere from F_P/4 to 4 F_P with a width of a quarter to all of
    its centre: in ln F, a flat start and a sharp rise."""
    a, f_m = rng.uniform(0.45, 0.85), F_P * 2.0 ** rng.uniform(-2, 2)
    w = f_m * rng.uniform(0.25, 1.0)
    return lambda f: r0 + (a - r0) * (expit((np.maximum(f, 0.0) - f_m) / w) - expit(-f_m / w)) / expit(f_m / w)


def staircase(rng: np.random.Generator, r0: float) -> Curve:
    """Gains that come in steps (as a curriculum's phases): 2-5 steps of 0.04-0.15, each a steep sigmoid in ln F,
    1-3 doublings apart, the first anywhere in the pilots."""
    n = int(rng.integers(2, 6))
    heights, slopes = rng.uniform(0.04, 0.15, n), rng.uniform(6.0, 10.0, n)
    mids = F_P * 2.0 ** (rng.uniform(-5, -1) + np.cumsum(rng.uniform(1, 3, n)) - 1)
    steps = [sigmoid(0.0, h, b, m) for h, b, m in zip(heights, slopes, mids, strict=True)]
    return lambda f: np.minimum(r0 + sum(step(f) for step in steps), 1.0)


def log_in_f(rng: np.random.Generator, r0: float) -> Curve:
    """A straight rise in ln F from F0, 0.02-0.08 per e-fold, with no cap below a pass rate of 1."""
    f0, k = F_P * 2.0 ** rng.uniform(-9, -5), rng.uniform(0.02, 0.08)
    return lambda f: np.clip(r0 + k * np.log(np.maximum(f, 1e-300) / f0), r0, 1.0)


def inverse_power(rng: np.random.Generator, r0: float) -> Curve:
    """An approach to A as a power law in F (A - (A - R0) (1 + F / F_s)^-alpha: a Chinchilla-style saturation),
    alpha 0.2-1, F_s from F_P/64 to F_P."""
    a, alpha, f_s = rng.uniform(0.45, 0.9), rng.uniform(0.2, 1.0), F_P * 2.0 ** rng.uniform(-6, 0)
    return lambda f: a - (a - r0) * (1 + np.maximum(f, 0.0) / f_s) ** -alpha


def mixed(rng: np.random.Generator, r0: float) -> Curve:
    """Each arm a shape of its own, drawn from every other shape: a grid whose arms follow different laws (a rule
    arm that keeps rising beside a reward-model arm that collapses)."""
    others = [g for name, g in GENERATORS.items() if name != "mixed" and name not in YOURS]
    return others[int(rng.integers(len(others)))](rng, r0)


HOLDOUT: dict[str, Callable[[np.random.Generator, float], Curve]] = {
    "gompertz": gompertz, "late-rise": late_rise, "ceiling": ceiling, "decline": decline,
    "exp-sat": exp_saturation, "linear-F": linear_in_f, "double-sig": double_sigmoid, "plateau": plateau, "dip": dip,
    "rise-in-F": rise_in_f, "jump": jump, "wobble": wobble, "power-F": power_in_f, "logistic-F": logistic_in_f,
    "staircase": staircase, "log-F": log_in_f, "inv-power": inverse_power, "mixed": mixed}
GENERATORS = FAMILIES | HOLDOUT
YOURS: set[str] = set()
"""The shapes ``--shape`` added (kept out of ``mixed``, so its draws stay the same)."""


def add_shape(spec: str) -> str:
    """Register ``FILE.py:FUNCTION`` as a held-out shape named FUNCTION: FUNCTION(rng, r0) returns a curve, a
    function from FLOPs (a numpy array) to the mean reward in [0, 1], with R0 at 0 FLOPs; the largest pilot is at
    F_P = 1e20 FLOPs and F at 2 F_P. Raises ValueError with one line when it cannot."""
    import importlib.util
    from pathlib import Path

    path, _, name = spec.rpartition(":")
    if not path or not name or not Path(path).is_file():
        raise ValueError(f"--shape {spec}: expected FILE.py:FUNCTION with an existing FILE.py")
    module_spec = importlib.util.spec_from_file_location(f"shape_{Path(path).stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise ValueError(f"--shape {spec}: cannot load {path} as Python")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    generator = getattr(module, name, None)
    if not callable(generator):
        raise ValueError(f"--shape {spec}: {path} has no function {name}")
    if name in GENERATORS:
        raise ValueError(f"--shape {spec}: {name} is already a shape's name")
    curve = generator(np.random.default_rng(0), 0.2)
    values = np.asarray(curve(np.array([0.0, F_P / 4, F_P, TARGET])), dtype=float)
    if values.shape != (4,) or not np.all((values >= 0) & (values <= 1)):
        raise ValueError(f"--shape {spec}: its curve must map an array of FLOPs to rewards in [0, 1], got {values}")
    HOLDOUT[name] = GENERATORS[name] = generator
    YOURS.add(name)
    return name

