"""verl's own FLOP estimate (flopplan.engines.verl.verl_mfu_estimate, torch-free) against a hand-computed case, the
peer formula, and flopplan's count: the sign of the update gap."""

from __future__ import annotations

import pytest
from test_verl import BASE

from flopplan.engines.verl import (
    verl_mfu_estimate,
)
from flopplan.lengths import Length
from flopplan.peers import verl as peer_verl
from flopplan.recipe import Recipe

# -- verl's own FLOP estimate -----------------------------------------------------------------------------------

def tiny(**changes) -> Recipe:
    return Recipe(**{**BASE, "policy": "tiny", "lora_rank": None, "prompts_per_step": 2, "group_size": 2,
                     "prompt_len": Length.fixed(3), "completion_len": Length.fixed(5), **changes})


def test_verls_estimate_on_a_hand_computed_case():
    # tiny: h 128, I 256, L 2, H 4, KV 2, d 32, V 32. dense_N = 2 x (3*128*256 + 128*(128+64+64+128)) + 2*32*128
    # = 2 x (98,304 + 49,152) + 8,192 = 303,104. One sequence of 3 + 5 = 8 tokens: 6 x 303,104 x 8 = 14,548,992
    # plus attention 6 x 8^2 x 32 x 4 x 2 = 98,304: 14,647,296; 4 sequences: 58,589,184.
    out = verl_mfu_estimate(tiny())
    assert out["verl_update_flops"] == 58_589_184
    two = verl_mfu_estimate(tiny(iterations=2, optimizer_batch=2), update_seconds=2.0, n_gpus=4, peak_flops=1e9)
    assert two["verl_update_flops"] == 2 * 58_589_184 and two["verl_flops_per_optimizer_step"] == 58_589_184 / 2
    assert two["mfu"] == pytest.approx(2 * 58_589_184 / 2.0 / 1e9 / 4)
    assert set(out["not_counted_by_verl"]) == {"rollout.prefill", "rollout.decode", "old_logprobs"}


def test_verls_estimate_equals_the_peer_formula_and_handles_ragged_lengths():
    seven = Recipe(**{**BASE, "policy": "qwen2.5-7b"})
    assert verl_mfu_estimate(seven)["verl_update_flops"] == peer_verl(seven.policy_spec, 128 * 384, 384)
    ragged = tiny(prompt_len=Length.fixed(50), completion_len=Length.empirical([100, 300]))
    by_hand = sum(verl_mfu_estimate(tiny(prompt_len=Length.fixed(50), completion_len=Length.fixed(k)))[
        "verl_update_flops"] for k in (100, 300)) / 2
    assert verl_mfu_estimate(ragged)["verl_update_flops"] == pytest.approx(by_hand, rel=1e-12)


def test_the_update_gap_has_the_expected_sign():
    """verl prices 6N per token whatever the training: LoRA's frozen base (no weight gradients) makes it an
    overestimate, full fine-tuning with recompute (8N) an underestimate; recompute moves only flopplan's count."""
    lora = verl_mfu_estimate(Recipe(**BASE, grad_ckpt=False))
    assert lora["update_rel_diff"] > 0.2
    full = verl_mfu_estimate(Recipe(**{**BASE, "policy": "qwen2.5-7b"}, lora_rank=None))
    assert full["update_rel_diff"] < -0.1
    on, off = (verl_mfu_estimate(Recipe(**BASE, grad_ckpt=g)) for g in (True, False))
    assert on["verl_update_flops"] == off["verl_update_flops"] and on["update_flops"] > off["update_flops"]
    assert on["step_rel_diff"] < on["update_rel_diff"]
