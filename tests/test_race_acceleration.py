"""flopplan.race.acceleration: the test for a rise still bending up in ln F, the rise's reach, the raised upper end."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from flopplan.race.acceleration import assess, convex_share, fit_rise, raise_upper, reach
from flopplan.race.ensemble import model_average
from flopplan.race.families import ArmSample

F = 1e20 * 2.0 ** np.arange(-6, 1)  # 7 evaluation positions up to 1e20


def sample(curve: np.ndarray, flops: np.ndarray = F, k: int = 60, sd: float = 0.01, seed: int = 0) -> ArmSample:
    """3 seeds at ``flops``, the mean ``curve``; k replicates with noise sd on every point."""
    rng = np.random.default_rng(seed)
    y = np.broadcast_to(curve, (1 + k, 3, flops.size)).copy()
    y[1:] += sd * rng.standard_normal(y[1:].shape)
    return ArmSample(np.tile(flops, (3, 1)), y, np.ones_like(y), np.full(1 + k, 0.2))


def straight_in_f(f: np.ndarray) -> np.ndarray:
    return 0.2 + 0.25 * f / 1e20  # each doubling gains as much as all before: convex in ln F


def saturating(f: np.ndarray) -> np.ndarray:
    return 0.2 + 0.5 * (1 - (f / 1e20 * 4) ** -0.5 / 2)  # a power law bending towards 0.7: concave in ln F


def test_the_test_tells_a_rise_in_f_from_one_that_bends_over():
    assert convex_share(sample(straight_in_f(F))) == 1.0
    assert convex_share(sample(saturating(F))) == 0.0
    assert convex_share(sample(np.full(F.size, 0.4))) == pytest.approx(0.5, abs=0.2)  # flat: a coin flip
    assert not assess(sample(np.full(F.size, 0.4)), 0.9).accelerating
    assert convex_share(sample(straight_in_f(F[:3]), flops=F[:3])) is None  # 3 positions: no test


def test_the_test_reads_the_last_positions_only():
    """A steep climb in ln F over the first four positions, then a rise in F: concave over all seven positions
    (quadratic coefficient -0.006), convex over the last four: the test says accelerating."""
    i = np.arange(F.size)
    y = np.where(i <= 3, 0.1 + 0.12 * np.log2(F / F[0]), 0.46 + 0.3 * (F - F[3]) / 1e20)
    u = np.log(F / F[-1])
    assert np.polyfit(u, y, 2)[0] < 0 < np.polyfit(u[-4:], y[-4:], 2)[0]
    assert convex_share(sample(y, sd=0.005)) >= 0.9


def test_the_rise_recovers_a_straight_line_in_f():
    fit = fit_rise(sample(straight_in_f(F), sd=0.0, k=2))
    assert fit is not None and fit.g[0] == pytest.approx(1.0, rel=0.05)
    assert fit.predict(np.array([2e20]))[0, 0] == pytest.approx(straight_in_f(np.array([2e20]))[0], abs=0.01)
    acc = assess(sample(straight_in_f(F)), 0.9)
    top = reach(acc, np.array([2e20]), 0.9)
    assert acc.accelerating and top is not None and top[0] >= straight_in_f(np.array([2e20]))[0] - 0.01
    assert reach(assess(sample(saturating(F)), 0.9), np.array([2e20]), 0.9) is None


def test_raise_upper_moves_only_the_upper_side_where_the_target_is_higher():
    rng = np.random.default_rng(3)
    reps = 0.5 + 0.05 * rng.standard_normal((200, 3))
    point = np.full(3, 0.5)
    target = np.array([0.8, 0.8, 0.52])  # column 0 within the pilots; column 2 below the replicates' upper end
    out = raise_upper(reps, point, target, np.array([False, True, True]), 0.9)
    assert np.array_equal(out[:, [0, 2]], reps[:, [0, 2]])
    assert np.quantile(out[:, 1], 0.95) == pytest.approx(0.8)
    below = reps[:, 1] <= 0.5
    assert np.array_equal(out[below, 1], reps[below, 1])  # the lower side and the point stay
    assert np.array_equal(np.argsort(out[:, 1], kind="stable"), np.argsort(reps[:, 1], kind="stable"))


def test_a_reach_of_one_makes_the_upper_end_one():
    """A reach at a pass rate of 1: the stretched replicates clip at 1, yet the upper end is 1, not the interpolation
    between a replicate below 1 and one at 1 (a truth of 1 would fall outside by a hair)."""
    rng = np.random.default_rng(4)
    reps = 0.6 + 0.05 * rng.standard_normal((100, 2))  # the percentile interpolates: 0.95 x 99 = 94.05
    out = raise_upper(reps, np.full(2, 0.6), np.array([1.0, 0.95]), np.array([True, True]), 0.9)
    assert np.quantile(out[:, 0], 0.95) == 1.0 and out.max() <= 1.0
    assert np.quantile(out[:, 1], 0.95) == pytest.approx(0.95)  # below 1: the percentile itself is the target
    assert np.all(np.diff(out[np.argsort(reps[:, 0]), 0]) >= 0)  # the order is kept (ties at 1 allowed)


def test_a_sigmoid_bending_within_the_pilots_is_not_raised():
    """A sigmoid in ln F with its midpoint at 2^-1.5 of the largest pilot: convex over the last five positions, not
    over the last four (it bends there): not accelerating, no raise; the rise in F beside it is raised."""
    y = 0.2 + 0.5 * expit(np.log2(F / 1e20) + 1.5)
    u = np.log(F / F[-1])
    assert np.polyfit(u[-5:], y[-5:], 2)[0] > 0.01 and abs(np.polyfit(u[-4:], y[-4:], 2)[0]) < 1e-9
    grid = np.array([1e-300, 1e20, 2e20])
    arms = [sample(y, seed=1), sample(straight_in_f(F), seed=2)]
    k = arms[0].y.shape[0] - 1
    sl_points = np.array([[0.2, y[-1], 0.62], [0.2, 0.45, 0.55]])
    sl_reps = sl_points[:, :, None] + 0.01 * np.random.default_rng(1).standard_normal((2, 3, k))
    out = model_average(arms, sl_points, sl_reps, grid, [1e20, 1e20], [2, 2], 0.9, np.random.default_rng(2))
    sig, rise = out.fits
    assert sig.convex_share is not None and sig.convex_share < 0.9 and sig.reach_at_budget is None
    assert rise.reach_at_budget is not None


def test_the_model_average_raises_an_accelerating_arms_upper_end_and_leaves_the_rest():
    """Two arms: a rise in F, whose mixture's upper end at 2x is below the truth and is raised above it, the
    mixture unchanged; and a saturating arm, not accelerating, whose replicates are not touched beyond the
    calibration."""
    arms = [sample(straight_in_f(F), seed=1), sample(saturating(F), seed=2)]
    grid = np.array([1e-300, 1e20, 2e20])
    k = arms[0].y.shape[0] - 1
    sl_points = np.array([[0.2, 0.45, 0.55], [0.2, 0.6, 0.63]])
    sl_reps = sl_points[:, :, None] + 0.01 * np.random.default_rng(1).standard_normal((2, 3, k))
    out = model_average(arms, sl_points, sl_reps, grid, [1e20, 1e20], [2, 2], 0.9, np.random.default_rng(2))
    truth = straight_in_f(np.array([2e20]))[0]
    assert np.quantile(out.mixtures[0, 2], 0.95) < truth <= np.quantile(out.replicates[0, 2], 0.95)
    rise, bend = out.fits
    assert rise.convex_share == 1.0 and rise.reach_at_budget is not None and rise.reach_at_budget >= truth - 0.01
    assert bend.convex_share == 0.0 and bend.reach_at_budget is None
    assert out.points[0, 2] == pytest.approx(rise.predicted_at_budget) and out.points[0, 2] < truth
