"""Paired bootstrap over seeds and evaluation prompts: predicted reward per arm and budget, intervals, P(best).

Data: per arm and seed, the pilot's evaluation points: the exact FLOPs spent so far and one score per evaluation
prompt (a pass rate, 0/1 or in [0, 1]) on a prompt set shared by every arm; step 0 (FLOPs = 0) measures R0.

One replicate (Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, ch. 6 and 13):

1. Prompts: Q indices drawn with replacement from the Q evaluation prompts, the SAME indices for every arm, seed and
   evaluation point (the pairing: a hard prompt stays in or out for all arms at once, so arms' differences do not
   carry the prompt noise they share). As weights c_q (multinomial(Q, 1/Q) / Q): y*_{s,t} = sum_q c_q score_{s,t,q}.
2. Seeds: S seed indices j -> s_j drawn with replacement. ``seed_pairing="paired"``: one draw of seed ids for every
   arm, right when a seed id means the same thing in every arm (same prompt order, same sampling stream);
   ``"independent"``: per arm, right when seed ids merely coincide; ``"auto"``: paired when all arms have the same
   seed ids. ``seed_scheme`` says what a draw does:
   * ``resample``: slot j is seed s_j (seeds and prompts both resampled: the "pigeonhole" bootstrap, Owen 2007,
     Ann. Appl. Stat. 1:246). It counts the seed x prompt evaluation noise (each 0/1 score's own sampling noise)
     E[k^2] E[c^2 Q^2] - 1 ~ 2.3 times (S = 3), the seed variance (S-1)/S times: conservative where evaluation
     noise dominates, as it does for 200 0/1 prompts and seed sd of a few points.
   * ``shrunk`` (default): slot j keeps its own prompt-resampled scores and swaps its seed deviation
     d_{j,t} = ybar_{j,t} - ybar_{.,t} for c d_{s_j,t}: y*_{j,t} = sum_q c_q score_{j,t,q} - d_{j,t} + c d_{s_j,t}.
     c rescales the deviations to the estimated seed variance (as Carpenter, Goldstein & Rasbash 2003, JRSS C
     52:431, rescale level-2 residuals): V_t = sum_s d_{s,t}^2 / (S-1) estimates seed variance + noise / Q, the
     seed x prompt interaction mean square estimates the noise, sigma2_seed,t = max(0, V_t - noise_t / Q), and
     c^2 = S/(S-1) sum_t sigma2_seed,t / sum_t V_t (pooled over positions; step 0 has its own c). The replicate
     mean then varies by about sigma2_seed/S + sigma2_prompt/Q + noise/(SQ), the variance of the seed-and-prompt
     mean. It needs seeds evaluated at aligned positions; an arm whose seeds differ in their number of points
     falls back to ``resample`` (recorded in :class:`ArmFit`). With S seeds the seed variance has S - 1 degrees of
     freedom: where it dominates, no bootstrap of 3 seeds reaches the nominal level.
   * The grid's seeds inform each arm's (:mod:`flopplan.race.seed_pooling`): an arm's seed variance per unit of
     squared gain, rho^2, is moderated halfway toward the mean of the other arms' (an empirical-Bayes shrinkage of
     few-df variances toward a common one, Smyth 2004). Where that raises it, each slot's gain over R0 in a
     replicate is multiplied by (1 + tau N(0, 1)), tau^2 the difference: three seeds that happen to agree, in a
     grid whose other arms' seeds spread (RL runs whose seeds take off or stall), no longer give a narrow
     interval. Where it lowers it, c is scaled by sqrt(rho~^2 / rho^2). benchmarks/race_misspecification.py
     ``--stall`` measures it. An arm of one seed (shrunk scheme) takes the other arms' mean rho^2 whole, or an
     assumed seed sd (``one_seed_sd``: 5 % of the gain by default) where no other arm shows one.
3. Pool: the fit points are every (slot, point), R0* the mean of the slots' step-0 values.
4. Refit the arm's curve (:func:`flopplan.race.curves.fit_curve_batch`, the original fit's grids); predict at F.

Point prediction: the fit on the original data. Interval (level 90 % by default), with theta* the replicates and
theta^ the point: ``percentile`` [q_{a/2}(theta*), q_{1-a/2}(theta*)]; ``basic`` [2 theta^ - q_{1-a/2},
2 theta^ - q_{a/2}]; ``bc`` (bias-corrected percentile, Efron 1981; BCa's acceleration is not estimated: it needs a
jackknife over two crossed resampling units) the percentile interval at levels Phi(2 z0 +- z_{1-a/2}) with
z0 = Phi^-1(share of theta* below theta^, ties counted half); percentile is the default (basic and bc under-cover,
benchmarks/race_coverage.py). P(best) = share of replicates where the arm's prediction is highest (ties split);
``samples`` keep the replicates' points (:mod:`flopplan.race.families` fits other curves to the same draws).

Identifiability: an arm's A is unidentified when its point fit has A or F_mid at the top of its grid or F_mid
beyond its largest FLOPs (:attr:`flopplan.race.curves.CurveFit.identified`), or when the bootstrap interval of A or
F_mid reaches the top edge (a share of replicates there >= (1 - level) / 2): the curve has not bent within the
pilots, and predictions beyond its data are not to be used.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr, ndtri

from flopplan.errors import UserError
from flopplan.race.curves import A_MAX, A_STEP, CurveFit, CurveFitBatch, default_grids, fit_curve_batch
from flopplan.race.families import ArmSample
from flopplan.race.pilot_data import ArmPilots, PilotData
from flopplan.race.seed_pooling import (
    ONE_SEED_SD,
    Moderation,
    SeedModeration,
    moderate,
    relative_seed_variance,
    seed_moments,
)

FloatArray = NDArray[np.float64]
Interval = Literal["percentile", "basic", "bc"]
INTERVALS: tuple[Interval, ...] = ("percentile", "basic", "bc")
MAX_REPLICATES = 100_000
"""The most bootstrap replicates an analysis takes (``race analyze --replicates``, and a race.json's
``n_replicates``, which ``race validate`` redoes): 200x the default of 500, far past where more replicates move a
90 % interval's ends (their Monte Carlo error shrinks as 1/sqrt(replicates)); the replicate arrays grow with the
number (10^9 asked for 224 GiB on the demo grid), so a typo is refused instead of filling memory."""
NOT_SHOWN = ("Not shown by the interval: error of the curve form itself (a run that leaves ScaleRL's curve after the "
             "pilots), anything past the largest pilot budget (late instability), another evaluation target or "
             "prompt population, seed variance that neither an arm's few seeds nor the grid's other arms showed "
             "(S seeds give it S-1 degrees of freedom and no rare bad seed; one seed none, its spread taken from the "
             "other arms or assumed), and for unidentified arms the grid "
             "bounds (A <= a_max, F_mid <= 100 x the largest FLOPs), which then set the interval.")


@dataclass(frozen=True, eq=False)
class _Packed:
    """One arm as arrays: step-0 mean scores z0 (S, Q); positive points flops (S, P), scores (S, P, Q), valid
    (S, P); for the ``shrunk`` seed scheme the seed deviations dev0 (S,), dev (S, P) and their factors c0, c."""

    z0: FloatArray
    flops: FloatArray
    scores: FloatArray
    valid: NDArray[np.bool_]
    seeds: tuple[int | str, ...]
    scheme: str
    dev0: FloatArray
    dev: FloatArray
    c0: float
    c: float
    gain_noise: FloatArray | None = None

    def rewards(self, cq: FloatArray | None, idx: NDArray[np.intp] | None
                ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Per replicate (prompt weights cq (k, Q), rows summing to 1; seed draws idx (k, S)): point rewards y
        (k, S, P), weights w (k, S, P), R0 (k,). ``resample``: slot j is seed idx_j (as a weight, the count of
        each seed). ``shrunk``: slot j keeps its own prompt-resampled scores and swaps its seed deviation for
        c x the deviation of seed idx_j (module docstring). cq = idx = None: the original data (k = 1)."""
        if cq is None or idx is None:
            return self.scores.mean(axis=2)[None], self.valid[None].astype(float), self.z0.mean(axis=1).mean()[None]
        n_s = idx.shape[1]
        y = np.einsum("spq,kq->ksp", self.scores, cq)
        y0 = cq @ self.z0.T
        if self.scheme == "shrunk":
            y += self.c * self.dev[idx] - self.dev[None]
            y0 += self.c0 * self.dev0[idx] - self.dev0[None]
            r0 = y0.mean(axis=1)
            if self.gain_noise is not None:
                y = r0[:, None, None] + (y - r0[:, None, None]) * (1 + self.gain_noise[:, :, None])
            return y, np.broadcast_to(self.valid.astype(float), y.shape), r0
        counts = (idx[:, :, None] == np.arange(n_s)).sum(axis=1).astype(float)
        return y, counts[:, :, None] * self.valid[None], (counts * y0).sum(axis=1) / n_s

    def relative_seed_variance(self) -> float | None:
        """rho^2 (:func:`flopplan.race.seed_pooling.relative_seed_variance`); None for the ``resample`` scheme."""
        return relative_seed_variance(self.scores, self.z0, self.dev) if self.scheme == "shrunk" else None

    def moderated(self, how: SeedModeration, noise_rng: np.random.Generator | None, k: int) -> _Packed:
        """This arm with its seed variance moderated (:mod:`flopplan.race.seed_pooling`) for k replicates;
        ``noise_rng`` draws the gain noise of a widened arm (None where no arm is widened)."""
        noise = how.tau * noise_rng.standard_normal((k, len(self.seeds))) if how.tau and noise_rng is not None else None
        return replace(self, c=self.c * how.scale, gain_noise=noise)


def _shrink_factor(scores: FloatArray) -> tuple[FloatArray, float]:
    """Seed deviations d_st = ybar_st - ybar_.t of scores (S, P, Q) and the factor c that gives their resampled
    mean the estimated seed variance (method of moments; module docstring), pooled over the P positions."""
    n_s = scores.shape[0]
    ybar = scores.mean(axis=2)
    dev = ybar - ybar.mean(axis=0)
    if n_s < 2:
        return dev, 0.0
    v, noise = seed_moments(scores, dev)
    if v.sum() <= 0:
        return dev, 0.0
    return dev, float(np.sqrt(n_s / (n_s - 1) * np.maximum(v - noise, 0.0).sum() / v.sum()))


def _pack(arm: ArmPilots, drop_first: int = 0, scheme: str = "shrunk") -> _Packed:
    if scheme not in ("shrunk", "resample"):
        raise UserError(f"seed_scheme must be 'shrunk' or 'resample', not {scheme!r}")
    arm.check()  # PilotData checks its arms; an ArmPilots given alone (temporal_holdout) had not been
    z0, runs = [], []
    for run in arm.runs:
        z0.append(np.mean([p.scores for p in run.points if p.flops == 0], axis=0))
        positive = sorted((p for p in run.points if p.flops > 0), key=lambda p: p.flops)[drop_first:]
        if not positive:
            raise UserError(f"arm {arm.name!r}, seed {run.seed!r}: no evaluation point with FLOPs > 0 left")
        runs.append(positive)
    n_pts, q = max(len(r) for r in runs), z0[0].size
    flops, scores = np.ones((len(runs), n_pts)), np.zeros((len(runs), n_pts, q))
    valid = np.zeros((len(runs), n_pts), dtype=bool)
    for s, positive in enumerate(runs):
        for t, p in enumerate(positive):
            flops[s, t], scores[s, t], valid[s, t] = p.flops, p.scores, True
        flops[s, len(positive):] = positive[-1].flops  # padding: weight 0, finite ln F
    z = np.asarray(z0)
    if scheme == "shrunk" and not valid.all():
        scheme = "resample"  # seeds with different numbers of points: no aligned positions to estimate from
    dev0, c0 = _shrink_factor(z[:, None, :])
    dev, c = _shrink_factor(scores)
    return _Packed(z, flops, scores, valid, tuple(r.seed for r in arm.runs), scheme, dev0[:, 0], dev, c0, c)


def _fit(packed: _Packed, cq: FloatArray | None, idx: NDArray[np.intp] | None, grids_from: CurveFitBatch | None,
         a_step: float, a_max: float, refine_f_mid: bool, cols: NDArray[np.bool_] | None = None
         ) -> tuple[CurveFitBatch, FloatArray, FloatArray]:
    """Fit every replicate (on the positions ``cols``, default all); also return its y and w (k, S, P)."""
    y, w, r0 = packed.rewards(cq, idx)
    sel = np.ones(packed.flops.shape[1], dtype=bool) if cols is None else cols
    f = packed.flops[:, sel]
    grids = grids_from.grids if grids_from is not None else default_grids(f[packed.valid[:, sel]], float(r0[0]),
                                                                          a_step=a_step, a_max=a_max)
    k = y.shape[0]
    batch = fit_curve_batch(np.log(f).ravel(), y[:, :, sel].reshape(k, -1), w[:, :, sel].reshape(k, -1), r0, grids,
                            refine_f_mid=refine_f_mid)
    return batch, y, w


def bootstrap_interval(replicates: ArrayLike, point: ArrayLike, level: float = 0.9,
                       method: Interval = "percentile") -> FloatArray:
    """Interval from replicates along the last axis around ``point`` (shape = replicates' leading shape): (..., 2).

    percentile: [q_{a/2}, q_{1-a/2}]; basic: [2 theta^ - q_{1-a/2}, 2 theta^ - q_{a/2}]; bc: percentile at levels
    Phi(2 z0 + z_{a/2}), Phi(2 z0 + z_{1-a/2}), z0 = Phi^-1(#(theta* < theta^) + #(theta* = theta^) / 2) / B),
    the share clipped to [1/(2B), 1 - 1/(2B)]. a = 1 - level. Quantiles: numpy's linear interpolation.
    """
    reps = np.asarray(replicates, dtype=float)
    pt = np.asarray(point, dtype=float)[..., None]
    alpha = 1.0 - level
    if method == "percentile":
        return np.moveaxis(np.quantile(reps, [alpha / 2, 1 - alpha / 2], axis=-1), 0, -1)
    if method == "basic":
        q = np.moveaxis(np.quantile(reps, [1 - alpha / 2, alpha / 2], axis=-1), 0, -1)
        return np.asarray(2 * pt - q)
    if method == "bc":
        n = reps.shape[-1]
        share = ((reps < pt).sum(axis=-1) + 0.5 * (reps == pt).sum(axis=-1)) / n
        z0 = ndtri(np.clip(share, 0.5 / n, 1 - 0.5 / n))
        z = ndtri(1 - alpha / 2)
        levels = np.stack([ndtr(2 * z0 - z), ndtr(2 * z0 + z)], axis=-1)
        flat_r, flat_l = reps.reshape(-1, n), levels.reshape(-1, 2)
        out = np.stack([np.quantile(r, lv) for r, lv in zip(flat_r, flat_l, strict=True)])
        return out.reshape(levels.shape)
    raise UserError(f"unknown interval method {method!r}; choose from {INTERVALS}")


def p_best(predictions: ArrayLike) -> FloatArray:
    """P(arm is best): predictions (n_arms, ..., n_replicates) -> (n_arms, ...), the share of replicates in which the
    arm's prediction is the highest, ties (within 1e-12) split equally among the tied arms."""
    p = np.asarray(predictions, dtype=float)
    top = p >= p.max(axis=0, keepdims=True) - 1e-12
    return np.asarray((top / top.sum(axis=0, keepdims=True)).mean(axis=-1))


@dataclass(frozen=True)
class ArmFit:
    """An arm's fit on the original data, the bootstrap interval [a_lo, a_hi] of A, and whether A is identified;
    the seed scheme used (``resample`` when ``shrunk`` was asked for but the seeds' evaluation points do not align)
    and, for ``shrunk``, the factor c on the seed deviations (0: no seed variance beyond evaluation noise)."""

    name: str
    fit: CurveFit
    a_lo: float
    a_hi: float
    a_upper_edge_share: float
    f_mid_upper_edge_share: float
    identified: bool
    max_flops: float
    n_seeds: int
    seed_scheme: str
    seed_factor: float


@dataclass(frozen=True)
class Prediction:
    """One arm at one budget: point (the original fit), the interval, P(best) among all arms (identified or not);
    ``extrapolation`` = budget / the arm's largest pilot FLOPs; ``identified`` copied from the arm."""

    arm: str
    flops: float
    point: float
    lo: float
    hi: float
    p_best: float
    extrapolation: float
    identified: bool


@dataclass(frozen=True, eq=False)
class BootstrapResult:
    """Everything :func:`paired_bootstrap` computed; ``replicates`` (n_arms, n_budgets, n_replicates) and ``points``
    (n_arms, n_budgets) allow other statistics, :meth:`intervals` other interval methods on the same replicates."""

    method: str  # how the replicates were drawn, in words (race.json's interval text)
    not_shown: str  # what the replicates leave out
    level: float  # of the intervals
    interval: Interval  # the interval method the predictions carry
    metric: str  # the reward the curves are fitted to
    seed_pairing: str  # how seeds were resampled
    budgets: tuple[float, ...]  # where every arm was predicted (ledger FLOPs)
    arms: tuple[ArmFit, ...]  # each arm's point fit
    predictions: tuple[Prediction, ...]  # each arm at each budget
    points: FloatArray  # (n_arms, n_budgets) point predictions
    replicates: FloatArray  # (n_arms, n_budgets, n_replicates)
    samples: tuple[ArmSample, ...] = ()  # the draws, for refits of other curve families

    def prediction(self, arm: str, flops: float) -> Prediction:
        for p in self.predictions:
            if p.arm == arm and np.isclose(p.flops, flops, rtol=1e-12, atol=0):
                return p
        raise KeyError((arm, flops))

    def intervals(self, method: Interval) -> FloatArray:
        """(n_arms, n_budgets, 2) intervals by ``method`` from the same replicates."""
        return bootstrap_interval(self.replicates, self.points, self.level, method)


def _arm_fit(name: str, fit: CurveFit, boot: CurveFitBatch, pack: _Packed, level: float, interval: Interval
             ) -> ArmFit:
    """Identified: neither A nor F_mid at the top of its grid in the point fit, and a share of replicates there
    below (1 - level) / 2, i.e. the bootstrap interval of each stops short of the edge."""
    a_share, m_share = float(boot.a_at_upper_edge.mean()), float(boot.f_mid_at_upper_edge.mean())
    lo_a, hi_a = bootstrap_interval(boot.a, fit.a, level, interval)
    identified = fit.identified and max(a_share, m_share) < (1.0 - level) / 2
    top = float(pack.flops[pack.valid].max())
    return ArmFit(name=name, fit=fit, a_lo=float(lo_a), a_hi=float(hi_a), a_upper_edge_share=a_share,
                  f_mid_upper_edge_share=m_share, identified=bool(identified), max_flops=top, n_seeds=len(pack.seeds),
                  seed_scheme=pack.scheme, seed_factor=float(pack.c))


def _prompt_weights(rng: np.random.Generator, q: int, k: int) -> FloatArray:
    return rng.multinomial(q, np.full(q, 1.0 / q), size=k) / q


def _seed_draws(rng: np.random.Generator, packs: list[_Packed], k: int, pairing: str) -> list[NDArray[np.intp]]:
    """Seed indices (k, S) per arm, drawn with replacement; ``paired``: one draw of seed ids shared by all arms."""
    ids = [set(p.seeds) for p in packs]
    if pairing == "paired" and not all(i == ids[0] for i in ids):
        raise UserError("seed_pairing='paired' needs the same seed ids in every arm")
    if pairing not in ("paired", "independent"):
        raise UserError(f"seed_pairing must be 'auto', 'paired' or 'independent', not {pairing!r}")
    if pairing == "independent":
        return [rng.integers(0, len(p.seeds), size=(k, len(p.seeds))) for p in packs]
    order = sorted(ids[0], key=str)
    shared = rng.integers(0, len(order), size=(k, len(order)))
    out = []
    for p in packs:
        to_arm = np.array([p.seeds.index(seed) for seed in order])  # shared id position -> this arm's index
        out.append(to_arm[shared])
    return out


def _resolve_pairing(data: PilotData, seed_pairing: str) -> str:
    if seed_pairing != "auto":
        return seed_pairing
    ids = [{run.seed for run in arm.runs} for arm in data.arms]
    return "paired" if all(i == ids[0] for i in ids) else "independent"


def paired_bootstrap(data: PilotData, budgets: ArrayLike, *, n_replicates: int = 500, level: float = 0.9,
                     interval: Interval = "percentile", metric: Literal["reward", "gain"] = "reward",
                     seed_pairing: str = "auto", seed_scheme: str = "shrunk", pair_prompts: bool = True,
                     drop_first: int = 0, rng: np.random.Generator | int | None = None, a_step: float = A_STEP,
                     a_max: float = A_MAX, refine_f_mid: bool = True, seed_moderation: Moderation = "both",
                     one_seed_sd: float = ONE_SEED_SD) -> BootstrapResult:
    """The paired bootstrap of the module docstring: per arm and budget the predicted ``metric`` (``reward`` R, or
    ``gain`` R - R0), its interval and P(best). ``seed_scheme``: ``shrunk`` (default) or ``resample`` (the
    pigeonhole bootstrap, conservative). ``pair_prompts=False`` draws prompts independently per arm (an ablation:
    it ignores the shared prompt set). ``drop_first``: the first k positive-FLOP points of each seed are left out
    of every fit. ``rng``: a numpy Generator or a seed. ``seed_moderation``: how the grid's seeds inform each
    arm's seed variance (:mod:`flopplan.race.seed_pooling`; ``widen`` and ``none`` are ablations);
    ``one_seed_sd``: the relative seed sd assumed for an arm of one seed where no other arm shows one."""
    gen = np.random.default_rng(rng)
    f_budgets = np.atleast_1d(np.asarray(budgets, dtype=float))
    if f_budgets.ndim != 1 or np.any(f_budgets <= 0) or n_replicates < 10 or not 0 < level < 1:
        raise UserError("budgets must be FLOPs > 0, n_replicates >= 10, 0 < level < 1")
    packs = [_pack(arm, drop_first, seed_scheme) for arm in data.arms]
    pairing = _resolve_pairing(data, seed_pairing)
    q = data.n_prompts
    cq_shared = _prompt_weights(gen, q, n_replicates)
    draws = _seed_draws(gen, packs, n_replicates, pairing)
    one_seed = [len(p.seeds) == 1 and p.scheme == "shrunk" for p in packs]  # resample (an ablation): as before
    mods = moderate([p.relative_seed_variance() for p in packs], seed_moderation, one_seed, one_seed_sd)
    noise_rng = np.random.default_rng(gen.integers(2**63)) if any(m.tau for m in mods) else None
    packs = [p.moderated(m, noise_rng, n_replicates) for p, m in zip(packs, mods, strict=True)]
    points = np.empty((len(packs), f_budgets.size))
    reps = np.empty((len(packs), f_budgets.size, n_replicates))
    arms, samples = [], []
    for i, (arm, pack) in enumerate(zip(data.arms, packs, strict=True)):
        orig, y0, w0 = _fit(pack, None, None, None, a_step, a_max, refine_f_mid)
        cq = cq_shared if pair_prompts else _prompt_weights(gen, q, n_replicates)
        boot, y, w = _fit(pack, cq, draws[i], orig, a_step, a_max, refine_f_mid)
        samples.append(ArmSample(pack.flops, np.concatenate([y0, y]), np.concatenate([w0, w]),
                                 np.concatenate([orig.r0, boot.r0])))
        shift_o, shift_b = (orig.r0[:, None], boot.r0[:, None]) if metric == "gain" else (0.0, 0.0)
        points[i] = (orig.predict(f_budgets) - shift_o)[0]
        reps[i] = (boot.predict(f_budgets) - shift_b).T
        arms.append(_arm_fit(arm.name, orig.fit(0, dropped_first=drop_first), boot, pack, level, interval))
    bounds = bootstrap_interval(reps, points, level, interval)
    best = p_best(reps)
    preds = tuple(Prediction(af.name, float(f), float(points[i, j]), float(bounds[i, j, 0]), float(bounds[i, j, 1]),
                             float(best[i, j]), float(f / af.max_flops), af.identified)
                  for i, af in enumerate(arms) for j, f in enumerate(f_budgets))
    schemes = sorted({a.seed_scheme for a in arms})
    method = (f"paired bootstrap, {n_replicates} replicates: prompts resampled with replacement "
              f"({'same indices for every arm and point' if pair_prompts else 'independently per arm'}), seeds "
              f"resampled with replacement ({pairing}, {'/'.join(schemes)}); ScaleRL refit per replicate; "
              f"{level:.0%} {interval} interval of the {metric}; P(best) = share of replicates with the highest "
              f"prediction"
              + _moderation_text(data, mods))
    return BootstrapResult(method, NOT_SHOWN, level, interval, metric, pairing, tuple(float(f) for f in f_budgets),
                           tuple(arms), preds, points, reps, tuple(samples))


def _moderation_text(data: PilotData, mods: list[SeedModeration]) -> str:
    arms = list(zip(data.arms, mods, strict=True))
    single = [f"{a.name} tau {m.tau:.3f}" for a, m in arms if len(a.runs) == 1 and m.tau]
    assumed = next((m.tau for m in mods if m.assumed), None)  # the race's one_seed_sd, where no arm showed one
    widened = [f"{a.name} tau {m.tau:.3f}" for a, m in arms if len(a.runs) > 1 and m.tau]
    narrowed = [f"{a.name} x {m.scale:.3f}" for a, m in arms if m.scale != 1]
    parts = []
    if widened or narrowed:
        parts.append("each arm's seed variance moderated halfway to the other arms' (flopplan.race.seed_pooling): "
                     + "; ".join([*(["seed gains x (1 + tau N(0, 1)) for " + ", ".join(widened)] if widened else []),
                                  *(["seed deviations scaled for " + ", ".join(narrowed)] if narrowed else [])]))
    if single:
        parts.append("one seed, so no seed variance of its own (flopplan.race.seed_pooling): seed gains x "
                     "(1 + tau N(0, 1)), " + (f"tau {assumed:.3f} assumed, as no other arm shows a "
                                              "seed variance," if assumed is not None else
                                              "tau^2 the other arms' mean rho^2,")
                     + " for " + ", ".join(single))
    return "".join(f"; {p}" for p in parts)


@dataclass(frozen=True)
class HoldoutPoint:
    """One held-out evaluation position: seed-mean FLOPs, observed and predicted seed means, error = observed -
    predicted; [lo, hi] the interval of the predicted mean curve, ``inside`` whether the observation is in it;
    [error_lo, error_hi] the interval of the error, ``consistent`` whether it contains 0."""

    position: int
    flops: float
    observed: float
    predicted: float
    error: float
    lo: float
    hi: float
    inside: bool
    error_lo: float
    error_hi: float
    consistent: bool


@dataclass(frozen=True)
class HoldoutResult:
    """:func:`temporal_holdout`'s answer; ``coverage`` and ``consistency`` are the shares of held-out points
    ``inside`` and ``consistent``."""

    arm: str
    split_flops: float
    arm_fit: ArmFit
    points: tuple[HoldoutPoint, ...]
    coverage: float
    consistency: float
    mean_abs_error: float
    method: str


def temporal_holdout(arm: ArmPilots, *, fraction: float = 0.5, n_replicates: int = 500, level: float = 0.9,
                     interval: Interval = "percentile", drop_first: int = 0,
                     rng: np.random.Generator | int | None = None, a_step: float = A_STEP, a_max: float = A_MAX,
                     refine_f_mid: bool = True, rtol: float = 0.02, seed_scheme: str = "shrunk") -> HoldoutResult:
    """Refit on the evaluation points in the first ``fraction`` of the arm's FLOPs, predict the others.

    Positions are aligned across seeds (each seed needs the same number of positive-FLOP points); position t is
    fitted when its seed-mean FLOPs <= ``fraction`` x the largest x (1 + ``rtol``): exact FLOPs wobble around
    nominal evaluation points, and the point at half the budget belongs to the first half. Per held-out position:
    observed = seed mean of the prompt-mean scores, predicted = seed mean of the fit at each seed's own FLOPs.
    Two checks, from the same paired replicates (prompts and seeds resampled as in :func:`paired_bootstrap`,
    held-out points with them): ``inside``, the observation within the interval of the predicted mean curve, which
    leaves out the held-out point's own noise (a calibrated fit covers less than ``level``); ``consistent``, 0
    within the interval of observed - predicted, whose replicates carry the fit's and the point's noise with their
    shared seeds and prompts (a calibrated fit: ``level``).
    """
    gen = np.random.default_rng(rng)
    pack = _pack(arm, drop_first, seed_scheme)
    if not pack.valid.all():
        raise UserError(f"arm {arm.name!r}: every seed needs the same number of positive-FLOP evaluation points")
    fk = pack.flops.mean(axis=0)
    split = fraction * float(fk.max()) * (1 + rtol)
    cols, hold = fk <= split, fk > split
    if np.unique(fk[cols]).size < 3 or not hold.any():
        raise UserError("the holdout needs >= 3 evaluation positions to fit and >= 1 to predict")
    pack = replace(pack, c=_shrink_factor(pack.scores[:, cols])[1])  # the seed variance of the fitted half only
    q, n_s = pack.scores.shape[2], len(pack.seeds)

    def run(cq: FloatArray | None, idx: NDArray[np.intp] | None, grids_from: CurveFitBatch | None
            ) -> tuple[CurveFitBatch, FloatArray, FloatArray]:
        batch, y, w = _fit(pack, cq, idx, grids_from, a_step, a_max, refine_f_mid, cols)
        k, wh = y.shape[0], w[:, :, hold]
        pred = batch.predict(pack.flops[:, hold].ravel()).reshape(k, n_s, -1)
        return batch, (wh * y[:, :, hold]).sum(axis=1) / wh.sum(axis=1), (wh * pred).sum(axis=1) / wh.sum(axis=1)

    orig, obs0, pred0 = run(None, None, None)
    idx = gen.integers(0, n_s, size=(n_replicates, n_s))
    boot, obs_b, pred_b = run(_prompt_weights(gen, q, n_replicates), idx, orig)
    curve = bootstrap_interval(pred_b.T, pred0[0], level, interval)
    err = bootstrap_interval((obs_b - pred_b).T, (obs0 - pred0)[0], level, interval)
    fit = orig.fit(0, dropped_first=drop_first)
    t_ = 1e-12  # a fit's floating-point residue: an observed 0 against a curve's 5.2e-37 is inside (a held-out race)
    points = tuple(HoldoutPoint(int(t), float(fk[t]), float(obs0[0, j]), float(pred0[0, j]),
                                float(obs0[0, j] - pred0[0, j]), float(curve[j, 0]), float(curve[j, 1]),
                                bool(curve[j, 0] - t_ <= obs0[0, j] <= curve[j, 1] + t_), float(err[j, 0]),
                                float(err[j, 1]), bool(err[j, 0] - t_ <= 0.0 <= err[j, 1] + t_))
                   for j, t in enumerate(np.flatnonzero(hold)))
    method = (f"temporal holdout: fit on positions with FLOPs <= {fraction:g} x max, paired bootstrap of "
              f"{n_replicates} replicates (prompts and seeds, {pack.scheme}), {level:.0%} {interval} intervals")
    sub = replace(pack, flops=pack.flops[:, cols], valid=pack.valid[:, cols])
    return HoldoutResult(arm.name, split, _arm_fit(arm.name, fit, boot, sub, level, interval), points,
                         float(np.mean([p.inside for p in points])), float(np.mean([p.consistent for p in points])),
                         float(np.mean([abs(p.error) for p in points])), method)
