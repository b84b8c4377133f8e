"""flopplan.race.persistence: the order seen at the largest pilot, pooled with the curves into the stated P(best)."""

from __future__ import annotations

import numpy as np
import pytest

from flopplan.race.families import ArmSample
from flopplan.race.persistence import PERSISTENCE_WEIGHT, last_observed, stated_p_best


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


def test_the_stated_p_best_pools_the_two_forecasts_with_their_weights():
    k = 50
    seen = np.stack([np.full(k, 0.6), np.full(k, 0.5)])  # arm 0 always seen best
    curves = np.stack([np.full(k, 0.6), np.full(k, 0.7)])  # the curves always put arm 1 first at F
    stated, persist, by_curves = stated_p_best(curves, seen, np.array([True, True]))
    assert persist == pytest.approx([1.0, 0.0]) and by_curves == pytest.approx([0.0, 1.0])
    assert stated == pytest.approx([PERSISTENCE_WEIGHT, 1 - PERSISTENCE_WEIGHT])
    both = stated_p_best(curves[::-1], seen, np.array([True, True]))[0]
    assert both[0] == pytest.approx(1.0) and both[1] == pytest.approx(0.0)


def test_an_arm_not_seen_at_the_top_rung_gets_nothing_from_persistence():
    k = 40
    seen = np.stack([np.full(k, 0.9), np.full(k, 0.5), np.full(k, 0.4)])  # arm 0's 0.9 was seen at a lower rung
    curves = np.stack([np.full(k, 0.8), np.full(k, 0.6), np.full(k, 0.5)])
    stated, persist, by_curves = stated_p_best(curves, seen, np.array([False, True, True]))
    assert persist == pytest.approx([0.0, 1.0, 0.0]) and by_curves == pytest.approx([1.0, 0.0, 0.0])
    assert stated == pytest.approx([1 - PERSISTENCE_WEIGHT, PERSISTENCE_WEIGHT, 0.0])
    assert stated.sum() == pytest.approx(1.0)
