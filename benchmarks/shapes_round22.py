"""Four held-out shapes written for round 22 before any figure was measured on them, from laws in the literature
that no rule of RACE was tuned on and that differ from the round-20 shapes (benchmarks/shapes_round20.py). Run
them as shapes of your own (the --shape option is repeatable):

    python benchmarks/race_misspecification.py --families --shape benchmarks/shapes_round22.py:broken_power \
        --shape benchmarks/shapes_round22.py:stagewise --shape benchmarks/shapes_round22.py:grokking \
        --shape benchmarks/shapes_round22.py:entropy_ceiling

Each function draws one arm (see benchmarks/shapes_example.py for the contract); F_P = 1e20 is the benchmark's
largest pilot and F = 2 F_P its budget.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import expit

F_P = 1e20  # the benchmark's largest pilot
Curve = Callable[[np.ndarray], np.ndarray]


def _log(x: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(x, 1e-300))


def broken_power(rng: np.random.Generator, r0: float) -> Curve:
    """A broken neural scaling law (Caballero, Gupta, Rish and Krueger, arXiv 2210.14891) with one break, on the
    error 1 - R: E = E_inf + (E_0 - E_inf) (1 + x)^(-c0) (1 + (x / d)^(1 / s))^(-c1 s), x = F / F_s. The power
    law starts at F_s (F_P / 1024 to F_P / 16) with exponent c0 (0.05-0.5); at the break d (F_P / 16 to 8 F_P) the
    exponent turns into c0 + c1, drawn from 0.02-0.8, so the law can steepen or flatten; s (0.1-1) is how sharp the
    break is, and the ceiling A = 1 - E_inf is 0.55-0.95. A fit to the pilots reads the slope before a break that
    may sit between F_P and the budget, where the curve bends in a direction the pilots cannot show."""
    a, c0, c_after, s = rng.uniform(0.55, 0.95), rng.uniform(0.05, 0.5), rng.uniform(0.02, 0.8), rng.uniform(0.1, 1.0)
    f_s, f_break = F_P * 2.0 ** rng.uniform(-10, -4), F_P * 2.0 ** rng.uniform(-4, 3)
    c1, ln_d = c_after - c0, np.log(f_break / f_s)

    def curve(f: np.ndarray) -> np.ndarray:
        x = np.maximum(f, 0.0) / f_s
        ln_g = -c0 * np.log1p(x) - c1 * s * np.logaddexp(0.0, (_log(x) - ln_d) / s)
        return np.clip(a - (a - r0) * np.exp(np.minimum(ln_g, 0.0)), 0.0, 1.0)

    return curve


def stagewise(rng: np.random.Generator, r0: float) -> Curve:
    """Stage-like learning from the exact solution for deep linear networks (Saxe, McClelland and Ganguli, ICLR
    2014; PNAS 116:11537, 2019): a mode of strength s grown from u0 follows s / (1 + (s / u0 - 1) e^(-2 s t / tau)),
    a logistic in training time itself (here F, not ln F), with its transition at tau ln(s / u0 - 1) / (2 s) and a
    sharpness g = ln(s / u0 - 1) of 2-7. Two modes carry shares w and 1 - w (w 0.2-0.8) of the gain to A (0.45-0.9);
    the first is learnt at F_1 (F_P / 32 to F_P / 2), the second at F_2 (F_P / 2 to 6 F_P). In ln F each stage is a
    steep step, so the pilots see a plateau after the first and nothing of the second until it is nearly there."""
    a, w = rng.uniform(0.45, 0.9), rng.uniform(0.2, 0.8)
    modes = [
        (w, F_P * 2.0 ** rng.uniform(-5, -1), rng.uniform(2, 7)),
        (1 - w, F_P * 2.0 ** rng.uniform(-1, 2.6), rng.uniform(2, 7)),
    ]

    def curve(f: np.ndarray) -> np.ndarray:
        x = np.maximum(f, 0.0)
        gain = sum(share * (expit(g * (x / f_i - 1)) - expit(-g)) / (1 - expit(-g)) for share, f_i, g in modes)
        return np.clip(r0 + (a - r0) * gain, 0.0, 1.0)

    return curve


def grokking(rng: np.random.Generator, r0: float) -> Curve:
    """Delayed generalisation, grokking (Power, Burda, Edwards, Babuschkin and Misra, arXiv 2201.02177; the phases of
    Nanda et al., ICLR 2023): held-out reward stays on a plateau near R0 (drifting by p, -0.03 to +0.05, while the
    model memorises), then past an onset F_on (F_P / 8 to 2 F_P), smoothed over a fraction h (0.05-0.3) of F_on, it
    climbs as an exponential approach in the compute spent since the onset, 1 - exp(-(F - F_on) / (tau F_on)), tau
    0.3-2, towards A (0.4-0.9). Arms whose onset lies past F_P look flat in every pilot and some of them rise before
    the budget; arms whose onset lies just before F_P show a kink the pilots cannot tell from a slow start."""
    a, p, tau = rng.uniform(0.4, 0.9), rng.uniform(-0.03, 0.05), rng.uniform(0.3, 2.0)
    f_on, h = F_P * 2.0 ** rng.uniform(-3, 1), rng.uniform(0.05, 0.3)

    def curve(f: np.ndarray) -> np.ndarray:
        u = np.maximum(f, 0.0) / f_on
        since = h * (np.logaddexp(0.0, (u - 1) / h) - np.logaddexp(0.0, -1 / h))  # a smoothed max(u - 1, 0)
        plateau = p * u / (1 + u)
        return np.clip(r0 + plateau + (a - r0 - p) * -np.expm1(-since / tau), 0.0, 1.0)

    return curve


def entropy_ceiling(rng: np.random.Generator, r0: float) -> Curve:
    """The entropy-performance law of RL on reasoning models (Cui et al., "The Entropy Mechanism of Reinforcement
    Learning for Reasoning Language Models", arXiv 2505.22617): R = -a exp(H) + b, so the reward is capped at b - a
    once the policy entropy H is spent. Here H decays as a power of F, H = H0 (1 + F / F_H)^(-gamma), gamma 0.5-1.5,
    from H0 (0.5-1.5); a is 0.15-0.35 and b is set so that R(0) = R0, which gives the ceiling A = R0 + a (e^H0 - 1)
    (capped at 0.95): arms that start with more entropy reach higher. They also spend it more slowly, F_H being
    F_P / 32 to F_P times H0^4, so fast, low-ceiling arms lead at the pilots and slow, high-ceiling arms may pass
    them by the budget. A slow linear drift d F / F_P (d -0.02 to 0.03), which is what is left once the entropy is
    spent, stands for gains or losses that the law leaves out."""
    h0, a, gamma, d = rng.uniform(0.5, 1.5), rng.uniform(0.15, 0.35), rng.uniform(0.5, 1.5), rng.uniform(-0.02, 0.03)
    f_h = F_P * 2.0 ** rng.uniform(-5, 0) * h0**4
    gain = min(a * np.expm1(h0), 0.95 - r0)

    def curve(f: np.ndarray) -> np.ndarray:
        x = np.maximum(f, 0.0)
        entropy = h0 * (1 + x / f_h) ** -gamma
        spent = 1 - np.expm1(entropy) / np.expm1(h0)
        return np.clip(r0 + gain * spent + d * np.minimum(x / F_P, 1e6), 0.0, 1.0)

    return curve
