"""flopplan.race.fall and the steep-fall family in the model average: the test fires on pilots that fall, not on
rising or flat ones, and only an arm that falls gets the family."""

from __future__ import annotations

import numpy as np
import pytest

from flopplan.race import fall
from flopplan.race.acceleration import last_quadratic
from flopplan.race.ensemble import model_average
from flopplan.race.families import ArmSample

F = 1e20 * 2.0 ** np.arange(-6, 1)  # 7 evaluation positions up to 1e20
U = np.log(F / F[-1])


def sample(curve: np.ndarray, k: int = 100, sd: float = 0.0, seed: int = 0, flops: np.ndarray = F) -> ArmSample:
    """3 seeds at ``flops``, the same mean ``curve``; k replicates with noise sd on every point."""
    rng = np.random.default_rng(seed)
    y = np.broadcast_to(curve, (1 + k, 3, flops.size)).copy()
    y[1:] += sd * rng.standard_normal(y[1:].shape)
    return ArmSample(np.tile(flops, (3, 1)), y, np.ones_like(y), np.full(1 + k, 0.2))


def share(s: ArmSample) -> float | None:
    """The fall test's share on an arm's draws (the quadratic the acceleration test fits)."""
    return fall.fall_share(last_quadratic(s))


def over_optimised(u: np.ndarray) -> np.ndarray:
    """A rise whose fall steepens: the slope at the largest pilot (u = 0) is 0.03 - 0.075 < 0."""
    return 0.6 + 0.03 * u - 0.05 * np.exp(1.5 * u)


def test_the_fall_test_fires_on_a_fall_and_not_on_a_rise_or_a_plateau():
    assert share(sample(over_optimised(U), sd=0.005)) >= 0.9
    assert share(sample(0.5 + 0.02 * U, sd=0.005)) <= 0.1
    flat = share(sample(np.full(F.size, 0.5), sd=0.02))
    assert flat is not None and 0.2 <= flat <= 0.8 and not fall.falling(flat, 0.9)  # within the noise: a coin flip
    assert share(sample(over_optimised(U[:3]), flops=F[:3])) is None  # 3 positions: no test
    assert not fall.falling(None, 0.9) and fall.falling(0.95, 0.9)


def model_average_of(s: ArmSample, monkeypatch: pytest.MonkeyPatch | None = None):
    if monkeypatch is not None:  # the same arm with the gate closed: the steep fall not fitted
        monkeypatch.setattr(fall, "falling", lambda share, level: False)
    grid = np.array([1e-300, 5e19, 4e20])
    k = s.y.shape[0] - 1
    sl_points = np.array([[0.2, float(s.y[0, 0, -2]), float(s.y[0, 0, -1])]])  # ScaleRL read flat at the pilots
    sl_reps = sl_points[:, :, None] + 0.005 * np.random.default_rng(1).standard_normal((1, 3, k))
    return model_average([s], sl_points, sl_reps, grid, [1e20], [2], 0.9, np.random.default_rng(2))


def test_a_falling_arm_gets_the_steep_fall_and_its_interval_holds_the_fall(monkeypatch):
    """Pilots that fall ever faster: the steep fall is fitted, takes the largest weight (it predicts the held-out
    positions), and the 90 % interval at 4x the largest pilot holds the truth; the same arm without the family
    (the four other families and ScaleRL) puts the whole interval above it."""
    s = sample(over_optimised(U), sd=0.005)
    truth = float(over_optimised(np.log(4.0)))
    out = model_average_of(s)
    rec = out.fits[0]
    weights = {f.family: f.weight for f in rec.families}
    assert rec.fall_share is not None and rec.fall_share >= 0.9
    assert max(weights, key=lambda m: weights[m]) == "steep-fall"
    lo, hi = np.quantile(out.replicates[0, 2], [0.05, 0.95])
    assert lo <= truth <= hi
    gated = model_average_of(s, monkeypatch)
    assert {f.family: f.weight for f in gated.fits[0].families}["steep-fall"] == 0.0
    assert np.quantile(gated.replicates[0, 2], 0.05) > truth


def test_a_rising_arm_does_not_get_the_steep_fall():
    rec = model_average_of(sample(0.5 + 0.02 * U, sd=0.005)).fits[0]
    steep = next(f for f in rec.families if f.family == "steep-fall")
    assert rec.fall_share is not None and rec.fall_share < 0.9
    assert steep.weight == 0.0 and steep.predicted_at_budget is None
