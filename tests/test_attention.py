"""Attention's query-key pairs: exact halving, and the sliding-window counts against the mask and the cache."""

from __future__ import annotations

import numpy as np
import pytest

from flopplan.attention import cap, decode_pairs, decode_pairs_sum, half, window_prefill_pairs

WINDOW = 4


def test_half_is_exact_and_refuses_odd_integers():
    assert half(10**30 + 2) == 5 * 10**29 + 1
    assert (half(np.array([4, 6], dtype=np.int64)) == np.array([2, 3])).all()
    with pytest.raises(ValueError):
        half(3)


@pytest.mark.parametrize("attention", ["dense", "causal"])
@pytest.mark.parametrize("seq", [1, 3, 4, 5, 11])
def test_windowed_prefill_leaves_out_exactly_the_pairs_beyond_the_window(attention, seq):
    """Against the mask itself: the pairs the attention convention counts (dense: all; causal: key <= query)
    minus those a windowed kernel skips (query - key >= window)."""
    counted = {(q, k) for q in range(seq) for k in range(seq) if attention == "dense" or k <= q}
    inside = {(q, k) for q, k in counted if q - k < WINDOW}
    causal = attention == "causal"
    assert window_prefill_pairs(seq, causal, WINDOW, windowed=True) == len(inside)
    assert window_prefill_pairs(seq, causal, WINDOW, windowed=False) == len(counted)
    assert window_prefill_pairs(seq, causal, None, windowed=True) == len(counted)


@pytest.mark.parametrize("prompt", range(0, 7))
@pytest.mark.parametrize("steps", range(0, 7))
def test_decode_pairs_sum_is_the_sum_of_capped_steps(prompt, steps):
    assert decode_pairs_sum(prompt, steps, WINDOW) == sum(min(prompt + j + 1, WINDOW) for j in range(steps))



def test_numpy_arrays_equal_integer_evaluation():
    """A grid of lengths evaluates at once (the planner's numpy grids) and equals the integers point by point."""
    prompts, steps = np.arange(0, 9).repeat(9), np.tile(np.arange(0, 9), 9)
    grid = decode_pairs_sum(prompts, steps, WINDOW)
    assert grid.tolist() == [decode_pairs_sum(int(p), int(k), WINDOW) for p, k in zip(prompts, steps, strict=True)]
    seqs = np.arange(1, 12)
    assert window_prefill_pairs(seqs, True, WINDOW, True).tolist() == [
        window_prefill_pairs(int(s), True, WINDOW, True) for s in seqs]
    assert decode_pairs(seqs, WINDOW).tolist() == [min(int(s) + 1, WINDOW) for s in seqs]
    assert cap(np.array([-1, 5]), 0, 3).tolist() == [0, 3] and cap(2.5, 0, None) == 2.5
