"""Model averaging over curve families, weighted out of sample, with intervals calibrated on the pilots' own
temporal holdout (split-conformal style): the prediction RACE decides on.

Per arm (:func:`model_average`):

1. Families: ScaleRL's sigmoid (:mod:`flopplan.race.curves`, its bootstrap replicates) and those of
   :mod:`flopplan.race.families`, each fitted to the same paired bootstrap draws (so replicate j of every arm and
   family resamples the same prompts and seeds); the steep-fall family only for an arm whose pilots already fall
   (:mod:`flopplan.race.fall`).
2. Leave the last points out: each family is refitted on the original data without its last evaluation positions
   (2 when the arm has >= 7 positions, 1 with 5 or 6, none with fewer) and predicts them (seed means at each seed's own
   FLOPs). Weight of family m: 1 / (MSE_m + tau^2), normalised, where MSE_m is its mean squared error on the held-out
   positions and tau^2 the bootstrap variance of the held-out observed means (a family within the noise keeps a
   full share; one that misses by 3 noise sd keeps about a tenth). A family the holdout could not refit gets the
   worst held-out MSE; with no holdout the fitted families share equally.
3. The mixture: replicate j takes family m's replicate j for a share w_m of the replicates (largest remainder,
   slots shuffled once per target by its random stream); the point is the weighted mean of the families' points. So the
   interval holds both the sampling noise and the families' disagreement.
4. Calibration: every arm of the target contributes scores sqrt(max((observed - model average)^2 - v, 0)) /
   ln(F_h / F_in) from step 2 (F_h the held-out FLOPs, F_in the largest refitted, v the bootstrap variance of that
   held-out observed mean): the error per unit of log-extrapolation beyond the observation's own noise. The truth
   at the budget is the curve, not one more noisy observation, and the mixture's spread already holds the sampling
   noise, so a miss the noise explains adds nothing (with |observed - model average| whole, two seeds and 100
   prompts covered 0.98 where 3 seeds and 200 prompts covered 0.97: docs/results.md, round 18). Their split-
   conformal quantile q (the ceil((n + 1) level)-th smallest of n scores, the largest when that exceeds n) is the
   half-width, per unit of ln F, of what the pilots' own curves did beyond a fit: at ledger FLOPs B beyond the
   arm's pilots, e = q ln(B / F_max). It is added to the mixture's half-width h in quadrature (sqrt(h^2 + e^2):
   the error beyond the pilots and the sampling and family spread as independent parts) by stretching the
   replicates about the point by sqrt(1 + (e / h)^2) (P(best) then sees the same width), then clipped to [0, 1]
   (a pass rate). Taking the larger of h and e instead left 78-79 % coverage where a second rise or a late
   rise starts after the pilots (benchmarks/race_misspecification.py; docs/results.md).
5. Acceleration: for an arm whose last pilots still bend up in ln F, the upper end of the calibrated interval
   beyond the pilots is raised to what a rise that keeps accelerating (a power of F from R0) reaches there
   (:mod:`flopplan.race.acceleration`: the test, the reach, and why the point and the mixture stay).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from flopplan.errors import UserError
from flopplan.race import acceleration, fall
from flopplan.race.curves import default_grids, fit_curve_batch
from flopplan.race.design_notes import HOLDOUT_POSITIONS
from flopplan.race.families import EVERY_FAMILY, FALL_FAMILY, FAMILIES, ArmSample, FamilyFit, fit_families

FloatArray = NDArray[np.float64]
SCALERL = "scalerl"
ALL_FAMILIES = (SCALERL, *EVERY_FAMILY)
R0_BELOW = 1e-200  # grid columns at or below these FLOPs read R0 (the analysis reads R0* at 1e-300)


@dataclass(frozen=True)
class FamilyReading:
    """One family in an arm's model average: its weight, its RMS error on the held-out positions (None: not held
    out) and its point prediction at the target budget (None: not fitted)."""

    family: str
    weight: float
    holdout_rmse: float | None
    predicted_at_budget: float | None


@dataclass(frozen=True)
class EnsembleFit:
    """An arm's model average: the families, the positions held out for the weights, the sd of the held-out observed
    means (tau), this arm's calibration scores and the target's calibration ``scale`` (half-width per unit of
    ln F beyond the pilots, pooled over the target's arms), the model-averaged R at the target budget; the
    acceleration test (:mod:`flopplan.race.acceleration`): the share of bootstrap draws whose last positions bend
    up in ln F (None: too few positions, or not recorded), and for an accelerating arm the reach at the target
    budget (the upper end its interval is raised to where it lies above it; None otherwise); the fall test
    (:mod:`flopplan.race.fall`): the share of draws whose last positions fall at the largest pilot (None: too few
    positions, or not recorded), the steep-fall family fitted where it reaches the level."""

    families: tuple[FamilyReading, ...]
    held_out: int
    holdout_noise: float
    scores: tuple[float, ...]
    scale: float
    predicted_at_budget: float
    convex_share: float | None = None
    reach_at_budget: float | None = None
    fall_share: float | None = None


@dataclass(frozen=True, eq=False)
class _Arm:
    fits: dict[str, FamilyFit | None]
    weights: dict[str, float]
    rmse: dict[str, float | None]
    scores: list[float]
    n_hold: int
    tau: float


@dataclass(frozen=True, eq=False)
class EnsembleResult:
    """Per arm, on the columns of the FLOPs grid: points (n_arms, m), calibrated replicates (n_arms, m, k), the
    mixture's replicates before the calibration's stretch (n_arms, m, k: the families' own spread, which
    :mod:`flopplan.race.persistence` reads as each draw's change between two budgets), the records, the
    calibration scale and the number of scores behind it, the method in words, and each arm's acceleration test
    with, for an accelerating arm, its rise fitted to every draw (:mod:`flopplan.race.acceleration`)."""

    points: FloatArray
    replicates: FloatArray
    mixtures: FloatArray
    fits: tuple[EnsembleFit, ...]
    scale: float
    n_scores: int
    method: str
    accelerations: tuple[acceleration.Acceleration, ...]


def seed_mean(values: FloatArray, w: FloatArray) -> FloatArray:
    """Weighted mean over seeds: values and w (..., S, P) -> (..., P)."""
    den = w.sum(axis=-2)
    return np.asarray((w * values).sum(axis=-2) / np.where(den > 0, den, 1.0))


def _scalerl_predict(sample: ArmSample, keep: NDArray[np.bool_], flops: FloatArray) -> FloatArray | None:
    """The ScaleRL fit on the original data at positions ``keep``, read at ``flops`` (S, H); None if unfittable."""
    f, y, w = sample.flops[:, keep], sample.y[0][:, keep], sample.w[0][:, keep]
    try:
        grids = default_grids(f[w > 0], float(sample.r0[0]))
        batch = fit_curve_batch(np.log(f).ravel(), y.ravel()[None], w.ravel()[None], sample.r0[:1], grids)
    except (UserError, ArithmeticError, ValueError, np.linalg.LinAlgError):
        return None
    return batch.predict(flops.ravel())[0].reshape(flops.shape)


def _holdout(sample: ArmSample, fits: dict[str, FamilyFit | None], falling: bool) -> _Arm:
    """Step 2 of the module docstring for one arm (weights, held-out RMSE, calibration scores)."""
    w0 = sample.w[0]
    valid_pos = (w0 > 0).any(axis=0)
    n_pos = int(valid_pos.sum())
    n_hold = 2 if n_pos >= HOLDOUT_POSITIONS + 2 else 1 if n_pos >= HOLDOUT_POSITIONS else 0
    fitted = [m for m in ALL_FAMILIES if m == SCALERL or fits.get(m) is not None]
    if n_hold == 0:
        return _Arm(fits, {m: 1.0 / len(fitted) for m in fitted}, dict.fromkeys(fitted), [], 0, 0.0)
    idx = np.flatnonzero(valid_pos)
    keep = np.zeros(w0.shape[1], dtype=bool)
    keep[idx[:-n_hold]] = True
    hold = np.zeros_like(keep)
    hold[idx[-n_hold:]] = True
    f_hold, w_hold = sample.flops[:, hold], w0[:, hold]
    observed = seed_mean(sample.y[0][:, hold], w_hold)
    noise2 = seed_mean(sample.y[1:, :, hold], sample.w[1:, :, hold]).var(axis=0)  # (H,) per held-out position
    tau2 = float(noise2.mean())
    inner = fit_families(ArmSample(sample.flops, sample.y[:1], sample.w[:1], sample.r0[:1]), keep, falling)
    preds: dict[str, FloatArray] = {}
    for m in fitted:
        if m == SCALERL:
            p = _scalerl_predict(sample, keep, f_hold)
        else:
            fit = inner.get(m)
            p = None if fit is None else fit.predict(f_hold.ravel())[0].reshape(f_hold.shape)
        if p is not None:
            preds[m] = seed_mean(p, w_hold)
    mse = {m: float(np.mean((observed - p) ** 2)) for m, p in preds.items()}
    worst = max(mse.values(), default=0.0)
    raw = {m: 1.0 / (mse.get(m, worst) + tau2 + 1e-12) for m in fitted}
    total = sum(raw.values())
    weights = {m: v / total for m, v in raw.items()}
    scores: list[float] = []
    if preds:
        norm = sum(weights[m] for m in preds)
        avg = sum(weights[m] * p for m, p in preds.items()) / norm
        f_in = float(sample.flops[:, keep][w0[:, keep] > 0].max())
        dist = np.log(seed_mean(f_hold, w_hold) / f_in)
        beyond = np.sqrt(np.maximum((observed - avg) ** 2 - noise2, 0.0))  # the miss beyond the observation's noise
        scores = (beyond / np.maximum(dist, 1e-9)).tolist()
    rmse: dict[str, float | None] = {m: (float(np.sqrt(mse[m])) if m in mse else None) for m in fitted}
    return _Arm(fits, weights, rmse, scores, n_hold, float(np.sqrt(tau2)))


def conformal_scale(scores: list[float], level: float) -> float:
    """The ceil((n + 1) level)-th smallest of n scores (the largest when that exceeds n); 0 with no score."""
    if not scores:
        return 0.0
    s = np.sort(scores)
    return float(s[min(int(np.ceil((s.size + 1) * level)), s.size) - 1])


def _allocate(weights: FloatArray, order: NDArray[np.intp]) -> NDArray[np.intp]:
    """Family index per replicate slot: counts by largest remainder of weights x k, laid out along ``order`` (one
    shuffle of the k slots shared by the target's arms: arms with equal weights get equal mixtures)."""
    k = order.size
    raw = weights * k
    counts = np.floor(raw).astype(int)
    counts[np.argsort(-(raw - counts), kind="stable")[: k - counts.sum()]] += 1
    out = np.empty(k, dtype=np.intp)
    out[order] = np.repeat(np.arange(weights.size), counts)
    return out


def model_average(samples: list[ArmSample], scalerl_points: FloatArray, scalerl_reps: FloatArray, grid: FloatArray,
                  max_flops: list[float], target_col: list[int], level: float, rng: np.random.Generator
                  ) -> EnsembleResult:
    """The module's model average for every arm on the FLOPs columns ``grid`` (m,): ``scalerl_points`` (n_arms, m)
    and ``scalerl_reps`` (n_arms, m, k) from the paired bootstrap whose draws ``samples`` hold; ``max_flops`` each
    arm's largest pilot FLOPs; ``target_col`` each arm's column of the target budget (for its record)."""
    arms = []
    accel = []
    falls = []
    for sample in samples:
        try:
            accel.append(acceleration.assess(sample, level))
        except (ArithmeticError, ValueError, np.linalg.LinAlgError):
            accel.append(acceleration.Acceleration(None, None))
        falls.append(fall.fall_share(accel[-1].quadratic))  # the same quadratic as the acceleration test's
        falling = fall.falling(falls[-1], level)
        try:
            fits = fit_families(sample, falling=falling)
        except (ArithmeticError, ValueError, np.linalg.LinAlgError):
            fits = dict.fromkeys(EVERY_FAMILY)
        arms.append(_holdout(sample, fits, falling))
    all_scores = [s for a in arms for s in a.scores]
    scale = conformal_scale(all_scores, level)
    n_arms, m, k = scalerl_reps.shape
    points, reps, mixtures, records = np.empty((n_arms, m)), np.empty((n_arms, m, k)), np.empty((n_arms, m, k)), []
    alpha = 1.0 - level
    order = rng.permutation(k)
    for i, a in enumerate(arms):
        names = list(a.weights)
        pred = {SCALERL: np.concatenate([scalerl_points[i][None], scalerl_reps[i].T])}  # (1 + k, m)
        for name in names:
            fit = a.fits.get(name)
            if name != SCALERL and fit is not None:
                with np.errstate(over="ignore", invalid="ignore"):
                    pred[name] = fit.predict(np.maximum(grid, 1e-300))
                pred[name][:, grid <= R0_BELOW] = samples[i].r0[:, None]  # F -> 0: the measured R0
        w = np.array([a.weights[n] for n in names])
        point = sum(a.weights[n] * pred[n][0] for n in names)
        slots = _allocate(w, order)
        stacked = np.stack([pred[n][1:] for n in names])  # (families, k, m)
        mix = stacked[slots, np.arange(k)]  # (k, m)
        lo, hi = np.quantile(mix, [alpha / 2, 1 - alpha / 2], axis=0)
        floor = scale * np.log(np.maximum(grid / max_flops[i], 1.0))
        half = np.maximum((hi - lo) / 2, 1e-12)
        stretch = np.sqrt(1.0 + (floor / half) ** 2)  # the half-width becomes sqrt(half^2 + floor^2)
        points[i] = point
        mixtures[i] = mix.T
        calibrated = np.clip(point[None] + stretch[None] * (mix - point[None]), 0.0, 1.0)
        reach = acceleration.reach(accel[i], grid, level)
        if reach is not None:
            calibrated = acceleration.raise_upper(calibrated, point, reach, grid > max_flops[i], level)
        reps[i] = calibrated.T
        c = target_col[i]
        records.append(EnsembleFit(
            families=tuple(FamilyReading(n, float(a.weights.get(n, 0.0)), a.rmse.get(n),
                                         float(pred[n][0, c]) if n in pred else None) for n in ALL_FAMILIES),
            held_out=a.n_hold, holdout_noise=a.tau, scores=tuple(a.scores), scale=scale,
            predicted_at_budget=float(point[c]), convex_share=accel[i].convex_share,
            reach_at_budget=None if reach is None else float(reach[c]), fall_share=falls[i]))
    method = (f"model average of {len(FAMILIES) + 1} curve families ({', '.join((SCALERL, *FAMILIES))}), and "
              f"{FALL_FAMILY} for an arm whose last 4 positions fall in >= {level:.0%} of the draws, over the same "
              "paired bootstrap draws, weights 1 / (held-out MSE + tau^2) from refits without the last 1-2 evaluation "
              f"positions; {level:.0%} percentile interval of the mixture, its half-width combined in quadrature "
              f"with the split-conformal q ln(B / largest pilot FLOPs), q = {scale:.4f} from {len(all_scores)} "
              "held-out scores of the target's arms (each the miss beyond its observed mean's bootstrap sd); "
              "for an arm whose last 4 positions bend up in ln F in >= "
              f"{level:.0%} of the draws, the upper end beyond its pilots raised to the {1 - (1 - level) / 2:.0%} "
              "percentile of a power-of-F rise fitted to the same draws where that is higher")
    return EnsembleResult(points, reps, mixtures, tuple(records), scale, len(all_scores), method, tuple(accel))
