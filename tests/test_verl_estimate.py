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


# -- verl's formula per model_type (utils/flops_counter.py) ---------------------------------------------------------

def base_txt(policy: str, **changes) -> Recipe:
    """The user's base.txt: 64 prompts x 8 rollouts, 512 + 512 tokens, one epoch."""
    return Recipe(**{**BASE, "policy": policy, "lora_rank": None, "prompts_per_step": 64, "group_size": 8,
                     "prompt_len": Length.fixed(512), "completion_len": Length.fixed(512), **changes})


def test_verls_gemma3_formula_windows_its_sliding_layers():
    # _estimate_gemma3_flops (:454-514), gemma-3-1b: h 1152, I 6912, L 26, H 4, KV 1, d 256, V 262144; layers 6, 12,
    # 18, 24 full, the other 22 sliding with window 512; 512 sequences of s = 1024
    h, s, d, heads = 1152, 1024, 256, 4
    dense = (3 * h * 6912 + h * (2 * heads * d + 2 * d)) * 26 + 2 * 262144 * h
    attention = 6 * d * heads * (4 * s * s + 22 * s * 512)
    assert 512 * (6 * dense * s + attention) == 4_144_402_922_471_424  # as the user computed it with verl's function
    assert verl_mfu_estimate(base_txt("gemma-3-1b"))["verl_update_flops"] == 4_144_402_922_471_424


def test_verls_moe_formula_counts_top_k_experts_and_the_router():
    # _estimate_qwen2_moe_flops (:417-449), qwen3-30b-a3b: h 2048, L 48, H 32, KV 4, d 128, V 151936, 128 experts,
    # top 8, expert width 768
    h, s, d = 2048, 1024, 128
    dense = (3 * h * 8 * 768 + h * 128 + h * (2 * 32 * d + 2 * 4 * d)) * 48 + 2 * 151936 * h
    assert 512 * (6 * dense * s + 6 * s * s * d * 32 * 48) == 11_180_383_987_040_256  # the user's figure
    assert verl_mfu_estimate(base_txt("qwen3-30b-a3b"))["verl_update_flops"] == 11_180_383_987_040_256


@pytest.mark.parametrize("policy", ["phi-3-mini-4k-instruct", "gemma-2-2b", "mixtral-8x7b-v0.1"])
def test_a_model_type_verl_has_no_formula_for_counts_zero(policy):
    # ESTIMATE_FUNC (:678-701) has no phi3, gemma2 or mixtral: _estimate_unknown_flops returns 0 (:633-634)
    assert verl_mfu_estimate(base_txt(policy))["verl_update_flops"] == 0


def test_sliding_windows_over_length_distributions():
    prompt, completion = Length.empirical([200, 300, 300]), Length.mean_max(400, 700)
    out = verl_mfu_estimate(base_txt("gemma-3-1b", prompt_len=prompt, completion_len=completion))
    by_hand = sum(wp * wk * verl_mfu_estimate(base_txt("gemma-3-1b", prompt_len=Length.fixed(p), completion_len=Length
                  .fixed(k)))["verl_update_flops"] for p, wp in zip(prompt.support, prompt.probs, strict=True)
                  for k, wk in zip(completion.support, completion.probs, strict=True))
    assert out["verl_update_flops"] == pytest.approx(by_hand, rel=1e-9)


def test_plan_from_verl_says_verl_counts_zero_for_a_model_type_it_does_not_know(tmp_path):
    from helpers import cli
    from test_verl import BASE_OVERRIDES

    path = tmp_path / "run.txt"
    path.write_text("\n".join(f"{k}={v}" for k, v in BASE_OVERRIDES.items() if not isinstance(v, list)) + "\n")
    out = cli("plan", "--from-verl", str(path), "--model", "gemma-2-2b", check=True).stdout
    assert "verl's MFU formula has no entry for model_type gemma2" in out and "counts 0 FLOPs" in out


@pytest.mark.parametrize(("model", "model_type", "counted"), [
    # the 4B/12B/27B repositories' config.json: model_type gemma3 (multimodal), no ESTIMATE_FUNC entry
    # (utils/flops_counter.py:678-701): verl counts 0; gemma-3-1b's is gemma3_text, which has a formula (:454-514)
    ("gemma-3-4b", "gemma3", 0), ("gemma-3-12b", "gemma3", 0), ("gemma-3-27b", "gemma3", 0),
    ("gemma-3-1b", "gemma3_text", None),
])
def test_verl_counts_zero_for_multimodal_gemma3(model, model_type, counted):
    estimate = verl_mfu_estimate(Recipe(**{**BASE, "policy": model}))
    assert estimate["model_type"] == model_type
    assert estimate["verl_update_flops"] == counted if counted is not None else estimate["verl_update_flops"] > 0
