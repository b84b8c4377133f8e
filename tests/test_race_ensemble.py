"""flopplan.race.families and flopplan.race.ensemble: each family recovers its own shape; disagreement widens."""

from __future__ import annotations

import numpy as np
import pytest

from flopplan.race.ensemble import conformal_scale, model_average
from flopplan.race.families import ALPHAS, FALL_RATES, FAMILIES, ArmSample, fit_families, fit_family

F = 1e20 * 2.0 ** np.arange(-6, 1)  # 7 evaluation positions up to 1e20


def sample(curve: np.ndarray, k: int = 20, sd: float = 0.0, seed: int = 0) -> ArmSample:
    """3 seeds at the positions F, the same mean ``curve``; k replicates with noise sd on every point."""
    rng = np.random.default_rng(seed)
    y = np.broadcast_to(curve, (1 + k, 3, F.size)).copy()
    y[1:] += sd * rng.standard_normal(y[1:].shape)
    return ArmSample(np.tile(F, (3, 1)), y, np.ones_like(y), np.full(1 + k, 0.2))


@pytest.mark.parametrize(("family", "curve"), [
    ("power", lambda u: 0.7 - 0.02 * np.exp(-ALPHAS[12] * u)),
    ("log-linear", lambda u: 0.5 + 0.05 * u),
    ("two-stage", lambda u: 0.5 + 0.01 * u + 0.08 * np.maximum(u + 1.386, 0)),
    ("turn-down", lambda u: 0.6 + 0.02 * u - 0.02 * u * u),
    ("steep-fall", lambda u: 0.6 + 0.02 * u - 0.01 * np.exp(FALL_RATES[6] * u)),
])
def test_each_family_recovers_its_own_shape(family, curve):
    u = np.log(F / F[-1])
    fit = fit_family(family, F, curve(u)[None], np.ones((1, F.size)), float(F[-1]))
    assert fit is not None and fit.sse[0] < 1e-6  # SSE = sum w y^2 - coef . X'Wy: cancellation at ~1e-9
    assert fit.predict(np.array([2e20]))[0, 0] == pytest.approx(np.clip(curve(np.log(2.0)), 0, 1), abs=1e-4)


def test_a_family_some_replicate_cannot_fit_is_left_out_for_the_arm():
    """A flat arm whose replicates fall (or bend up) in some draws: the families with a sign constraint are not
    fitted (not fitted on their bound, which would make them one-sided); a straight rise keeps them all."""
    flat = sample(np.full(F.size, 0.5), k=50, sd=0.02)
    assert [m for m, fit in fit_families(flat).items() if fit is None] == ["power", "log-linear", "turn-down",
                                                                          "steep-fall"]
    rising = sample(0.5 + 0.02 * np.log(F / F[-1]), k=50, sd=0.0)
    fits = fit_families(rising)
    assert all(fits[m] is not None for m in FAMILIES) and fits["steep-fall"] is None  # not falling: not tried


def test_a_family_needs_enough_positions():
    fits = fit_families(sample(np.linspace(0.3, 0.5, F.size)), keep=np.arange(F.size) < 4)
    assert fits["two-stage"] is None and fits["log-linear"] is not None
    assert set(fits) == {*FAMILIES, "steep-fall"}


def test_conformal_scale_is_the_finite_sample_quantile():
    assert conformal_scale([], 0.9) == 0.0
    assert conformal_scale([0.3, 0.1, 0.2], 0.9) == 0.3  # ceil(4 x 0.9) = 4 > 3: the largest
    scores = list(np.arange(1, 20) / 100)
    assert conformal_scale(scores, 0.9) == pytest.approx(0.18)  # the 18th of 19


def test_disagreeing_families_widen_the_interval_and_identical_arms_stay_identical():
    """An arm whose pilots fit a straight line in ln F gets a wider interval beyond its pilots than within, and
    two arms with the same points get the same points and replicates (P(best) exactly split)."""
    u = np.log(F / F[-1])
    s = sample(0.5 + 0.04 * u, sd=0.01)
    grid = np.array([1e-300, 5e19, 4e20])
    k = s.y.shape[0] - 1
    sl_points = np.tile(np.array([0.2, 0.47, 0.55]), (2, 1))
    sl_reps = sl_points[:, :, None] + 0.01 * np.random.default_rng(1).standard_normal((1, 3, k))
    out = model_average([s, s], sl_points, np.broadcast_to(sl_reps, (2, 3, k)).copy(), grid, [1e20, 1e20], [2, 2],
                        0.9, np.random.default_rng(2))
    assert np.array_equal(out.replicates[0], out.replicates[1]) and np.array_equal(out.points[0], out.points[1])
    lo, hi = np.quantile(out.replicates[0], [0.05, 0.95], axis=1)
    assert hi[2] - lo[2] > hi[1] - lo[1]
    rec = out.fits[0]
    assert sum(f.weight for f in rec.families) == pytest.approx(1.0) and rec.held_out == 2
    assert np.allclose(out.points[0, 0], 0.2)  # F -> 0 reads R0 in every family


def test_the_mixture_is_the_replicates_before_the_stretch_beyond_the_pilots():
    """Within the pilots (no extrapolation) the calibrated replicates are the mixture's (clipped to [0, 1]); beyond
    them the stretch widens the calibrated replicates about the point and leaves the mixture as it was. The last two
    positions sit 0.03 above the line, beyond the draws' noise, so the held-out scores are not 0."""
    u = np.log(F / F[-1])
    s = sample(0.5 + 0.04 * u + np.where(u > u[-3], 0.03, 0.0), sd=0.01)
    grid = np.array([1e-300, 5e19, 4e20])
    k = s.y.shape[0] - 1
    sl_points = np.array([[0.2, 0.47, 0.55]])
    sl_reps = sl_points[:, :, None] + 0.01 * np.random.default_rng(1).standard_normal((1, 3, k))
    out = model_average([s], sl_points, sl_reps, grid, [1e20], [2], 0.9, np.random.default_rng(2))
    assert out.mixtures.shape == out.replicates.shape and out.scale > 0
    assert np.allclose(out.replicates[0, 1], np.clip(out.mixtures[0, 1], 0, 1))
    spread_mix = np.ptp(out.mixtures[0, 2])
    assert np.ptp(out.replicates[0, 2]) > spread_mix > 0
    # the stretch is about the point: the calibrated replicates keep the mixture's order
    order = np.argsort(out.mixtures[0, 2], kind="stable")
    assert np.array_equal(np.argsort(out.replicates[0, 2], kind="stable"), order)


def test_a_held_out_miss_within_the_observation_noise_scores_zero():
    """The calibration scores measure the error beyond the pilots, not the held-out means' own sampling noise (the
    truth at the budget is a curve, not one more noisy observation): two arms with the same pilots miss their last
    two positions by 0.01; where the draws put the held-out means' sd at about 0.03 that miss scores 0, where the
    draws agree it scores its full size per unit of ln F."""
    u = np.log(F / F[-1])
    line = 0.5 + 0.04 * u
    line[-2:] += 0.01
    quiet, noisy = sample(line, k=200, sd=0.0), sample(line, k=200, sd=0.05)
    grid = np.array([1e-300, 5e19, 4e20])
    sl_points = np.tile(np.array([0.2, 0.48, 0.54]), (2, 1))
    sl_reps = np.repeat(sl_points[:, :, None], 200, axis=2)
    out = model_average([quiet, noisy], sl_points, sl_reps, grid, [1e20, 1e20], [2, 2], 0.9, np.random.default_rng(0))
    calm, loud = out.fits
    assert calm.holdout_noise < 1e-12 and loud.holdout_noise > 0.02
    assert all(s > 0 for s in calm.scores) and loud.scores == (0.0, 0.0)
    assert out.scale == max(calm.scores)  # 4 scores: the largest

