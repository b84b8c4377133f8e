"""The grid's seeds inform each arm's seed variance: an empirical-Bayes moderation of few-seed variances.

An arm of a RACE grid has 2-3 seeds, so its seed variance has 1-2 degrees of freedom: three RL seeds that all took
off show no spread although the arm could stall, and two seeds of which one stalled show a spread that a third
seed would likely pull in. The other arms of the grid, run on the same task, stack and seeds' stream, estimate the
same kind of variance. Measured per unit of squared gain (an arm that gains 0.4 varies more in absolute terms than
one that gains 0.1), each arm's estimate rho^2 is moderated halfway toward the mean of the other arms':

    rho~^2 = (rho^2 + rho0^2) / 2,    rho0^2 = mean over the other arms of their rho^2,

the posterior variance of limma's moderated t with the prior's degrees of freedom equal to the arm's own (Smyth
2004, "Linear models and empirical Bayes methods for assessing differential expression in microarray experiments",
Stat. Appl. Genet. Mol. Biol. 3:3, eq. 3: s~^2 = (d0 s0^2 + d s^2) / (d0 + d) with d0 = d).

The bootstrap (:mod:`flopplan.race.bootstrap`) applies it to its draws:
- where rho~^2 > rho^2 (the arm's seeds agree more than the grid's), each seed's gain over R0 in a replicate is
  multiplied by (1 + tau N(0, 1)), tau^2 = rho~^2 - rho^2;
- where rho~^2 < rho^2 (they spread more), the seed deviations the replicates swap in are scaled by
  sqrt(rho~^2 / rho^2), which scales the arm's seed variance to rho~^2.

Both directions (``both``, the default since 2026-12-03) keep the moderated estimate unbiased when every arm
shares one variance; widening only (``widen``, RACE's rule from 2026-12-03 to then) inflates it: with two seeds
E[max(rho^2, rho~^2)] is 1.24 times the shared variance, and the stated P(best) read 0.09-0.12 too low at the
demo's geometry (docs/results.md, round 17). ``none`` leaves every arm with its own seeds.

An arm with one seed shows no seed variance at all (0 degrees of freedom): the bootstrap would read its one run
as the arm's mean, and the stated P(best) of a one-seed grid ran 0.06-0.19 above the hit rate in four of the
issue's five simulated families, whose seeds differ (docs/results.md, round 24). With d = 0 the moderated
estimate is the prior alone: such an arm's seed gains get tau^2 = rho0^2, the mean of the other arms' rho^2, or
:data:`ONE_SEED_SD` squared (the race's ``race design --seed-sd``) where no other arm shows one (none has two
seeds, or none has gained :data:`MIN_GAIN`): an assumption, named in the interval's method. Other arms whose
seeds agree to within their noise (rho^2 = 0) give a prior of 0, and the arm is left as it is.

What it cannot see: a grid in which every arm's seeds happen to agree (nothing to pool), and arms whose seed
variance truly differs (a reward-model arm whose seeds stall beside rule arms that never do) are pulled toward
each other: the moderation assumes the arms' relative seed variances are alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from flopplan.errors import UserError, is_number

FloatArray = NDArray[np.float64]
Moderation = Literal["both", "widen", "none"]
MODERATIONS: tuple[Moderation, ...] = ("both", "widen", "none")
MIN_GAIN = 0.05
"""An arm whose seed mean gains less than this over R0 (root mean square over its positions) gives no rho."""
ONE_SEED_SD = 0.05
"""The relative seed sd (rho) assumed for an arm of one seed where no other arm of the grid shows a seed variance,
unless the race sets its own (``race design --seed-sd``): a seed sd of 5 % of the gain over R0. ScaleRL (Khatri et
al., arXiv 2510.13786) reports seeds moving the fitted asymptote A by about +-0.015 on a gain of about 0.3; RL runs
of small models can differ far more (the CPU demo's two seeds of one arm by up to 0.88, docs/results.md), so at
the default a one-seed grid's intervals stay a lower bound on the seeds' part."""


def is_seed_sd(value: object) -> bool:
    """A relative seed sd a race may assume for its one-seed arms: a number above 0 (none would be an assumption the
    interval could not state: no gain noise is drawn) and at most 1 (a seed's gain as uncertain as the gain)."""
    return is_number(value) and 0 < value <= 1


@dataclass(frozen=True)
class SeedModeration:
    """What the bootstrap does to one arm's seeds: ``tau``, the relative sd of the noise on each seed's gain
    (0: none); ``scale``, the factor on its seed deviations (1: none)."""

    tau: float = 0.0
    scale: float = 1.0
    assumed: bool = False  # tau is the assumed one (:data:`ONE_SEED_SD`), no other arm having shown a seed variance


def seed_moments(scores: FloatArray, dev: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per position of scores (S, P, Q), S >= 2, with seed deviations ``dev`` (S, P): the seed means' mean square
    V_t = sum_s d_st^2 / (S - 1) and the evaluation noise's part of it, eps_t / Q, eps_t the seed x prompt
    interaction mean square (the bootstrap's module docstring); V_t - eps_t / Q estimates the seed variance."""
    n_s, _, q = scores.shape
    ybar = scores.mean(axis=2)
    v = (dev**2).sum(axis=0) / (n_s - 1)
    inter = scores - ybar[:, :, None] - scores.mean(axis=0)[None] + ybar.mean(axis=0)[None, :, None]
    eps = (inter**2).sum(axis=(0, 2)) / ((n_s - 1) * (q - 1))
    return v, eps / q


def relative_seed_variance(scores: FloatArray, z0: FloatArray, dev: FloatArray) -> float | None:
    """rho^2 of one arm from its aligned positions, scores (S, P, Q), step-0 scores z0 (S, Q) and seed deviations
    dev (S, P): sum_t sigma2_seed,t / sum_t G_t^2 (sigma2_seed,t = V_t - eps_t / Q, :func:`seed_moments`; G_t the
    seed mean's gain over R0). None with fewer than 2 seeds or where the arm has not gained (:data:`MIN_GAIN`)."""
    n_s, n_p, _ = scores.shape
    if n_s < 2:
        return None
    gain = scores.mean(axis=2).mean(axis=0) - z0.mean()
    if (gain**2).sum() < MIN_GAIN**2 * n_p:
        return None
    v, noise = seed_moments(scores, dev)
    return float(np.maximum(v - noise, 0.0).sum() / (gain**2).sum())


def moderate(rho: list[float | None], how: Moderation = "both", one_seed: list[bool] | None = None,
             assumed_sd: float = ONE_SEED_SD) -> list[SeedModeration]:
    """Per arm (rho^2 from :func:`relative_seed_variance`, None: left out), what moderating its seed variance
    halfway toward the mean of the other arms' takes (module docstring). An arm with one seed (``one_seed``) takes
    the other arms' mean, or ``assumed_sd`` squared where no other arm has a rho; any other arm without a rho, or
    alone, is left as it is."""
    if how not in MODERATIONS:
        raise UserError(f"seed moderation must be one of {', '.join(MODERATIONS)}, not {how!r}")
    out = []
    for i, r in enumerate(rho):
        others = [x for j, x in enumerate(rho) if j != i and x is not None]
        if how != "none" and one_seed is not None and one_seed[i]:
            out.append(SeedModeration(tau=float(np.sqrt(np.mean(others)) if others else assumed_sd),
                                      assumed=not others))
            continue
        if how == "none" or r is None or not others:
            out.append(SeedModeration())
            continue
        prior = float(np.mean(others))
        target = (r + prior) / 2
        if prior > r:
            out.append(SeedModeration(tau=float(np.sqrt((prior - r) / 2))))
        elif target < r and how == "both":
            out.append(SeedModeration(scale=float(np.sqrt(target / r))))
        else:
            out.append(SeedModeration())
    return out
