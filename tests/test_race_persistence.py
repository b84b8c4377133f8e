"""flopplan.race.persistence: the reward seen at the largest pilot, carried to the budget by the curves' change."""

from __future__ import annotations

import numpy as np
import pytest

from flopplan.race.bootstrap import p_best
from flopplan.race.families import ArmSample
from flopplan.race.persistence import (
    HORIZON_SLACK,
    MEASURED_ARMS,
    MEASURED_HORIZON,
    MEASURED_PROMPTS,
    Challenger,
    _tau_draws,
    arms_caveat,
    challenger,
    held_back_caveat,
    horizon_caveat,
    last_observed,
    learned_reward_caveat,
    own_noise,
    p_best_if_stopped,
    pooled_change,
    prompts_caveat,
    stated_for,
    stated_p_best,
)
from flopplan.race.results import ArmInfo, Recommendation

STILL = np.zeros(2, dtype=bool)  # no arm of a two-arm pool accelerating


def test_last_observed_reads_each_seed_slot_at_its_own_last_evaluation():
    # 2 rows (original, one draw), 2 seed slots, 3 positions; slot 1 of the draw lacks its last position
    y = np.array([[[0.1, 0.2, 0.3], [0.4, 0.5, 0.7]],
                  [[0.1, 0.2, 0.9], [0.4, 0.6, 0.8]]])
    w = np.ones_like(y)
    w[1, 1, 2] = 0.0
    w[1, 0, :] *= 2.0  # the draw counts slot 0 twice
    got = last_observed(ArmSample(np.ones((2, 3)), y, w, np.zeros(2)))
    assert got == pytest.approx([(0.3 + 0.7) / 2, (2 * 0.9 + 0.6) / 3])


def test_a_slot_without_any_evaluation_in_a_draw_does_not_count():
    y = np.array([[[0.2, 0.4], [0.3, 0.5]], [[0.2, 0.4], [0.3, 0.5]]])
    w = np.ones_like(y)
    w[1, 1] = 0.0  # seed slot 1 not drawn at all in the draw
    assert last_observed(ArmSample(np.ones((2, 2)), y, w, np.zeros(2))) == pytest.approx([0.45, 0.4])


def test_the_stated_p_best_adds_the_change_still_to_come_to_the_level_seen():
    k = 50
    seen = np.stack([np.full(k, 0.6), np.full(k, 0.5)])  # arm 0 always seen best
    curves = np.stack([np.full(k, 0.6), np.full(k, 0.7)])  # the calibrated curves put arm 1 first at F
    late = np.stack([np.full(k, 0.02), np.full(k, 0.15)])  # arm 1 still rising: 0.65 against 0.62
    stated, persist, by_curves = stated_p_best(curves, seen, late, np.array([True, True]), STILL)
    assert persist == pytest.approx([1.0, 0.0]) and by_curves == pytest.approx([0.0, 1.0])
    assert stated == pytest.approx([0.0, 1.0])
    early = np.stack([np.full(k, 0.02), np.full(k, 0.05)])  # arm 1 rises too little to catch up: 0.55 < 0.62
    assert stated_p_best(curves, seen, early, np.array([True, True]), STILL)[0] == pytest.approx([1.0, 0.0])


def test_the_stated_p_best_is_the_share_of_paired_draws():
    rng = np.random.default_rng(3)
    k = 4000
    common = rng.normal(0.0, 0.05, k)  # the draws' prompt resampling moves both arms together
    seen = np.stack([0.50 + common + rng.normal(0, 0.01, k), 0.49 + common + rng.normal(0, 0.01, k)])
    change = np.stack([np.full(k, 0.05), np.full(k, 0.05)])
    stated = stated_p_best(seen + change, seen, change, np.array([True, True]), STILL)[0]
    # the paired difference is N(0.01, sqrt(2) x 0.01): P(arm 0 higher) = Phi(0.707) = 0.76
    assert stated[0] == pytest.approx(0.76, abs=0.03) and stated.sum() == pytest.approx(1.0)


def test_an_arm_not_seen_at_the_top_rung_gets_nothing_from_persistence_but_is_anchored():
    k = 40
    seen = np.stack([np.full(k, 0.5), np.full(k, 0.55), np.full(k, 0.4)])  # arm 0's 0.5 was seen at a lower rung
    change = np.stack([np.full(k, 0.2), np.full(k, 0.05), np.full(k, 0.05)])  # it has most of its rise ahead
    curves = np.stack([np.full(k, 0.8), np.full(k, 0.6), np.full(k, 0.5)])
    stated, persist, by_curves = stated_p_best(curves, seen, change, np.array([False, True, True]),
                                               np.zeros(3, dtype=bool))
    assert persist == pytest.approx([0.0, 1.0, 0.0]) and by_curves == pytest.approx([1.0, 0.0, 0.0])
    assert stated == pytest.approx([1.0, 0.0, 0.0])


def test_an_arm_that_stops_at_its_largest_pilot_keeps_only_its_lead_there():
    k = 100
    seen = np.stack([np.full(k, 0.55), np.linspace(0.38, 0.42, k)])  # arm 0 leads at the largest pilot
    change = np.stack([np.full(k, 0.2), np.linspace(0.10, 0.20, k)])  # both climb; arm 0 stays ahead
    assert stated_p_best(seen + change, seen, change, np.array([True, True]), STILL)[0] == pytest.approx([1.0, 0.0])
    # stopped at 0.55, arm 0 is passed in the draws where arm 1 ends above it: 0.38-0.42 + 0.10-0.20
    passed = np.mean(seen[1] + change[1] > 0.55)
    assert p_best_if_stopped(seen, change, 0) == pytest.approx(1 - passed) and 0 < passed < 1
    assert p_best_if_stopped(seen, change, 1) == pytest.approx(0.0)  # arm 1 stopped at 0.38-0.42: never best
    assert change[0, 0] == 0.2  # the caller's array is left alone


def draws_of(estimates: list[float], noise: float, k: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap-like draws of each arm's change: centred on the arm's estimate, scattered by its noise."""
    return np.array(estimates)[:, None] + rng.normal(0.0, noise, (len(estimates), k))


def test_changes_the_draws_cannot_tell_apart_are_pooled_and_the_order_seen_mostly_decides():
    rng = np.random.default_rng(5)
    k = 400
    change = draws_of([0.10, 0.11, 0.09], 0.03, k, rng)  # estimates within their noise of each other
    before, after = change.mean(axis=1), pooled_change(change).mean(axis=1)
    assert np.all(np.abs(after - before.mean()) < 0.5 * np.abs(before - before.mean()))  # pulled most of the way
    assert np.all(pooled_change(change).std(axis=1) < 0.6 * change.std(axis=1))
    seen = np.stack([np.full(k, 0.60), np.full(k, 0.58), np.full(k, 0.50)])
    curves = seen + change
    stated = stated_p_best(curves, seen, change, np.ones(3, dtype=bool), np.zeros(3, dtype=bool))[0]
    # the order seen leads, but not surely: how far to pool is itself uncertain with three arms (a plug-in
    # estimate of the spread, 0 here, gave [1, 0, 0])
    assert 0.6 < stated[0] < 0.95 and stated[1] > 0.05 and stated[2] < 0.01
    raw = stated_p_best(curves, seen, change, np.ones(3, dtype=bool), np.array([False, False, True]))[0]
    assert raw == pytest.approx(p_best(seen + change)) and 0.5 < raw[0] < 0.9  # an arm accelerates: each its own


def test_changes_far_apart_keep_their_own_and_shrinkage_keeps_order_and_centre():
    rng = np.random.default_rng(6)
    k = 400
    apart = draws_of([0.0, 0.2, 0.4], 0.01, k, rng)
    assert pooled_change(apart).mean(axis=1) == pytest.approx(apart.mean(axis=1), abs=1e-3)
    close = draws_of([0.04, 0.10, 0.16], 0.03, k, rng)  # estimates apart by about twice their noise
    before, after = close.mean(axis=1), pooled_change(close).mean(axis=1)
    assert np.all(np.diff(after) > 0) and after.mean() == pytest.approx(before.mean(), abs=0.002)
    assert np.all(np.abs(after - before.mean()) < np.abs(before - before.mean()))  # partly pooled
    assert np.all(pooled_change(close).std(axis=1) < close.std(axis=1))  # and surer, as the posterior is


def test_noise_every_arm_shares_does_not_pool_changes_that_differ():
    rng = np.random.default_rng(7)
    k = 400
    shared = rng.normal(0.0, 0.05, k)  # the same prompts in every arm's draw move every change together
    change = draws_of([0.10, 0.15], 0.005, k, rng) + shared
    assert pooled_change(change).mean(axis=1) == pytest.approx(change.mean(axis=1), abs=0.002)
    assert pooled_change(change[:1]) == pytest.approx(change[:1])  # one arm: nothing to pool


def test_the_p_best_stated_is_the_anchored_one_and_under_cannot_tell_its_mean_with_the_curves():
    for confidence in ("high", "low", "best observed"):
        assert stated_for(confidence, 0.9, 0.4) == 0.9
    assert stated_for("cannot tell", 0.9, 0.4) == pytest.approx(0.65)
    assert stated_for("cannot tell", 0.3, 0.3) == pytest.approx(0.3)


@pytest.mark.parametrize("arms", [2, 3, 4])
def test_an_arms_own_noise_is_counted_whole_and_the_noise_every_arm_shares_not_at_all(arms):
    """Less the arms' mean in each draw, an arm keeps (n - 1) / n of its own noise's variance and none of the
    shared noise's; the estimate undoes the first (without the n / (n - 1) factor two arms' noise reads half)."""
    rng = np.random.default_rng(8)
    k = 200_000
    change = draws_of([0.1 * i for i in range(arms)], 0.02, k, rng) + rng.normal(0.0, 0.05, k)
    assert own_noise(change) == pytest.approx(np.full(arms, 0.02**2), rel=0.02)


def test_two_arms_are_pooled_the_more_the_closer_they_are_within_their_noise():
    # two arms, own noise sd 0.03 each (the factor n / (n - 1) counts it whole: the variance of each arm's difference
    # from the pair's mean is only half of it): 0.036 apart, within the noise, pooled more than half way; 0.06 apart
    # less; 0.2 apart, far beyond it, kept nearly whole. The order is kept in each.
    rng = np.random.default_rng(8)
    noise = rng.normal(0.0, 0.03, (2, 4000))
    noise = (noise - noise.mean(axis=1, keepdims=True)) / noise.std(axis=1, ddof=1, keepdims=True) * 0.03
    kept = {}
    for gap in (0.036, 0.06, 0.2):
        pooled = pooled_change(np.array([[0.100], [0.100 + gap]]) + noise).mean(axis=1)
        kept[gap] = float(np.diff(pooled)[0]) / gap
        assert pooled.mean() == pytest.approx(0.100 + gap / 2, abs=1e-3)  # toward the pair's mean
    assert 0 < kept[0.036] < 0.5 and kept[0.036] < kept[0.06] < kept[0.2] and kept[0.2] > 0.85


def test_the_spread_between_arms_is_drawn_from_its_posterior_the_same_way_each_time():
    v = np.full(2, 0.03**2)
    same = _tau_draws(np.array([0.10, 0.10]), v, 400)  # no difference: tau mostly below the noise
    assert np.array_equal(same, _tau_draws(np.array([0.10, 0.10]), v, 400)) and np.median(same) < 0.03
    assert np.all(np.diff(same) >= 0) and same[0] == 0.0  # the posterior's quantiles, in order, from 0
    far = _tau_draws(np.array([0.0, 0.5, 1.0]), np.full(3, 0.01**2), 400)  # means far apart: tau near their sd
    assert np.median(far) == pytest.approx(0.5, rel=0.35)
    assert np.all(_tau_draws(np.array([0.2, 0.2]), np.zeros(2), 5) == 0.0)  # nothing to spread: no spread


def _rec(arm: str | None = "a", p_best: float | None = 0.9, horizon: float = 50.0, mode: str = "fitted",
         extrapolation: float | None = None) -> Recommendation:
    return Recommendation(target="math", arm=arm, mode=mode, confidence="high", reasons=(), flops=1e20, at_flops=1e20,
                          reward=0.5, lo=0.4, hi=0.6, gain=0.3, gain_lo=0.2, gain_hi=0.4, p_best=p_best,
                          runner_up=None, margin=None, margin_lo=None, margin_hi=None,
                          extrapolation=extrapolation, regime="undecided", upfront_flops=0, budget_left_flops=1e20,
                          interval="", horizon=horizon)


def test_the_horizon_caveat_starts_past_the_horizon_the_p_best_was_checked_at():
    edge = MEASURED_HORIZON * HORIZON_SLACK
    assert horizon_caveat(_rec(horizon=edge)) == [] and horizon_caveat(_rec(horizon=MEASURED_HORIZON)) == []
    (line,) = horizon_caveat(_rec(horizon=edge * 1.01))
    assert line.startswith(f"a: F is {edge * 1.01:.1f}x its largest pilot") and "P(best) of 0.90" in line
    assert horizon_caveat(_rec(arm=None)) == [] and horizon_caveat(_rec(p_best=None)) == []
    assert horizon_caveat(_rec(mode="best observed")) == []  # no forecast, nothing to qualify
    # read as the analysis extrapolates: F over the training FLOPs it read, not over a ledger that also holds
    # evaluations or, midway through a race, a rung the analysis does not read yet (a review's 8.1x against 17.0x)
    (line,) = horizon_caveat(_rec(horizon=edge, extrapolation=17.0))
    assert line.startswith("a: F is 17.0x its largest pilot")
    assert horizon_caveat(_rec(horizon=8.1, extrapolation=edge)) == []


def test_the_prompts_caveat_starts_below_the_prompts_the_analysis_was_checked_at():
    assert prompts_caveat("math", MEASURED_PROMPTS) == [] and prompts_caveat("math", 2000) == []
    (line,) = prompts_caveat("math", MEASURED_PROMPTS - 1)
    assert line.startswith(f"math: {MEASURED_PROMPTS - 1} evaluation prompts") and "--eval-prompts" in line


def test_the_arms_caveat_starts_beyond_the_arms_the_analysis_was_checked_at():
    assert arms_caveat("math", 2) == [] and arms_caveat("math", MEASURED_ARMS) == []
    (line,) = arms_caveat("math", MEASURED_ARMS + 1)
    assert line.startswith(f"math: {MEASURED_ARMS + 1} arms") and "unchecked" in line


def _arm(name: str, reward: str) -> ArmInfo:
    return ArmInfo(name=name, axes={"reward": reward}, params=1000,
                   split={"rollout": 0.5, "learning": 0.3, "feedback": 0.2})


def test_the_learned_reward_caveat_names_the_pool_arms_trained_on_a_reward_model():
    """Arms of the pool on an orm: or prm: reward are named; a rule reward, an arm outside the pool (eliminated,
    not comparable) and a recommendation with no fitted P(best) get none."""
    arms = [_arm("a", "rule"), _arm("b", "orm:tiny-rm"), _arm("c", "prm:Qwen/Qwen2.5-Math-PRM-7B"), _arm("d", "orm:x")]
    (line,) = learned_reward_caveat(_rec(), arms, {"a", "b", "c"})
    assert line.startswith("b, c: trained on a learned reward model") and "0.90" in line and "rounds 21 and 30" in line
    assert learned_reward_caveat(_rec(), arms, {"a"}) == []
    assert learned_reward_caveat(_rec(), [_arm("a", "rule"), _arm("e", "rule")], {"a", "e"}) == []
    assert learned_reward_caveat(_rec(p_best=None), arms, {"a", "b"}) == []
    assert learned_reward_caveat(_rec(mode="best observed"), arms, {"a", "b"}) == []


def test_the_learned_reward_caveat_reads_the_reward_the_pilots_trained_on():
    """A design's rule arm whose pilots' ledgers recorded a reward model (a user's script that loads one) is named;
    a recorded rule, or a recorded model outside the pool, is not; a design's orm arm whose ledgers say rule is
    not either."""
    arms = [_arm("a", "rule"), _arm("b", "rule")]
    assert learned_reward_caveat(_rec(), arms, {"a", "b"}) == []
    (line,) = learned_reward_caveat(_rec(), arms, {"a", "b"}, {"b": "orm:/run/flopplan/reward"})
    assert line.startswith("b (by its pilots' ledgers): trained on a learned reward model")
    assert learned_reward_caveat(_rec(), arms, {"a", "b"}, {"b": "rule"}) == []
    assert learned_reward_caveat(_rec(), arms, {"a"}, {"b": "orm:x"}) == []
    # the reverse: a design's orm arm whose script trained on its own rule rewards (the ledgers win)
    assert learned_reward_caveat(_rec(), [_arm("a", "rule"), _arm("b", "orm:x")], {"a", "b"}, {"b": "rule"}) == []


def test_a_challenger_is_the_anchored_leader_at_the_threshold_that_the_rules_did_not_pick():
    assert challenger(np.array([0.1, 0.9]), 0, 0.8) == 1
    assert challenger(np.array([0.2, 0.8]), 0, 0.8) == 1  # the threshold itself is enough
    assert challenger(np.array([0.25, 0.75]), 0, 0.8) is None
    assert challenger(np.array([0.9, 0.1]), 0, 0.8) is None  # the pick leads: nothing to move to
    assert challenger(np.array([0.05, 0.1, 0.85]), 1, 0.8) == 2


def test_the_held_back_caveat_gives_both_p_bests_only_when_the_calibrated_change_falls_short():
    short = Challenger("b", 0.93, 0.71, frozenset({"a", "b"}))
    (line,) = held_back_caveat(_rec(), short, 0.8)
    assert line.startswith("b: the anchored forecast makes it best at 100 EFLOP (P(best) 0.93)")
    assert "only 0.71 (< 0.8): a stays the recommendation" in line
    assert held_back_caveat(_rec(), short._replace(p_best_calibrated=0.8), 0.8) == []  # it holds: a move, no caveat


def test_an_arm_measured_more_precisely_keeps_more_of_its_own_change():
    # three arms 0.04 apart; the low arm's own noise is a third of the others': in each draw it shrinks by
    # v_i / (v_i + tau^2), less than the high arm, as far from the middle, does
    rng = np.random.default_rng(9)
    k = 2000
    own = rng.normal(0.0, 1.0, (3, k)) * np.array([[0.01], [0.03], [0.03]])
    change = np.array([[0.06], [0.10], [0.14]]) + own
    before, after = change.mean(axis=1), pooled_change(change).mean(axis=1)
    kept = (after - before.mean()) / (before - before.mean())  # the share of each arm's lead or lag it keeps
    assert kept[0] > 1.5 * kept[2] > 0
    assert np.all(np.diff(after) > 0)  # the order is kept
