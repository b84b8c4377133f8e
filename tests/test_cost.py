"""The GRPO step cost: each phase equals the FLOP model's exact formula, for fixed lengths and, in expectation, for
length distributions (checked against sums over the whole support); the traits of each engine and log-prob head."""

from __future__ import annotations

import pytest

from flopplan.arch import REGISTRY
from flopplan.cost import step_cost
from flopplan.formulas import LoRA, Training, decode_flops, forward_flops, generate_flops, train_flops
from flopplan.lengths import Length
from flopplan.recipe import Recipe, RewardSystem

# -- each phase equals the FLOP model's exact formula -----------------------------------------------------------

def test_fixed_length_phases_equal_the_exact_formulas():
    """Q prompts x G, fixed P and K, hf: one generate call of all rollouts; update micro-batches of G."""
    Q, G, P, K, mu, r = 16, 8, 200, 700, 2, 32
    spec, prm = REGISTRY["qwen2.5-1.5b"], REGISTRY["qwen2.5-math-prm-7b"]
    recipe = Recipe(policy="qwen2.5-1.5b", lora_rank=r, prompts_per_step=Q, group_size=G,
                    prompt_len=Length.fixed(P), completion_len=Length.fixed(K), iterations=mu, beta=0.1,
                    reward=RewardSystem.parse("prm:qwen2.5-math-prm-7b"), prm_steps=6, reward_overhead_tokens=30,
                    eval_every=10, eval_prompts=50, logprob_head="completion")  # logits_to_keep = K + 1
    phases = step_cost(recipe).step_phases
    lora = LoRA(r)
    generate = generate_flops(spec, Q * G, P, K, lora)
    prefill = sum(v for k, v in generate.items() if k.startswith("prefill/"))
    assert phases["rollout.prefill"] == prefill
    assert phases["rollout.decode"] == generate.total - prefill
    # the decode steps again, one by one (the closed form sums the series)
    assert phases["rollout.decode"] == sum(decode_flops(spec, Q * G, P + j, lora).total for j in range(K - 1))
    assert phases["old_logprobs"] == Q * forward_flops(spec, G, P + K, K + 1, lora).total
    assert phases["reference"] == Q * forward_flops(spec, G, P + K, K + 1).total
    training = Training(lora, "non-reentrant")
    assert phases["update"] == mu * Q * train_flops(spec, G, P + K, K + 1, training).total
    assert phases["reward"] == forward_flops(prm, Q * G, P + K + 30 + 6, P + K + 30 + 6).total
    evaluation = step_cost(recipe).eval_phases
    assert sum(evaluation.values()) == generate_flops(spec, 50, P, K, lora).total


def test_fused_log_prob_heads_follow_trl():
    """TRL >= 1.16 on the CPU: the chunked head on every position but the last, its matmul re-run in backward; with
    Triton: on the completion tokens only, padding excluded (each row's own length, in expectation)."""
    spec, lora = REGISTRY["qwen2.5-0.5b"], LoRA(8)
    h, V = spec.hidden_size, spec.vocab_size
    base = Recipe(policy="qwen2.5-0.5b", lora_rank=8, prompts_per_step=2, group_size=4, prompt_len=Length.fixed(30),
                  completion_len=Length.fixed(50), iterations=2)
    kept = step_cost(base.with_(logprob_head="completion")).step_phases
    training = Training(lora, "non-reentrant")
    for head, positions in (("fused", 30 + 50 - 1), ("fused-compact", 50)):
        fused = step_cost(base.with_(logprob_head=head)).step_phases
        body_and_head = 2 * 2 * train_flops(spec, 4, 80, positions, training).total
        assert fused["update"] == body_and_head + 2 * 2 * (2 * 4 * positions * h * V)  # + the recomputed tile
        assert fused["old_logprobs"] == 2 * forward_flops(spec, 4, 80, positions, lora).total
        assert fused["update"] > kept["update"] and fused["rollout.decode"] == kept["rollout.decode"]
    # padded batches: the compact head projects each row's own completion, the body the batch's longest
    K = Length.mean_max(20.0, 64)
    padded = step_cost(base.with_(completion_len=K, logprob_head="fused-compact", iterations=1,
                                  old_logprobs="on")).step_phases["old_logprobs"]
    body = _brute(lambda p, k: forward_flops(spec, 4, 30 + k, 0, lora).total, Length.fixed(30), K.max_of(8))
    assert padded == pytest.approx(2 * body + 2 * 8 * K.mean * h * V, rel=1e-12)


def test_vllm_traits():
    base = Recipe(engine="vllm", lora_rank=16, prompts_per_step=4, group_size=8,
                  prompt_len=Length.fixed(100), completion_len=Length.fixed(50))
    spec = REGISTRY[base.policy]
    shared = step_cost(base.with_(prefix_sharing=True)).step_phases
    plain = step_cost(base).step_phases
    # no LoRA in the rollout (TRL merges adapters for vLLM); prefill once per prompt with sharing
    assert plain["rollout.prefill"] == forward_flops(spec, 32, 100, 1).total
    assert shared["rollout.prefill"] == forward_flops(spec, 4, 100, 1).total
    assert plain["rollout.decode"] == shared["rollout.decode"]
    # vllm: old logprobs are recomputed by default (importance-sampling correction in TRL)
    assert "old_logprobs" in plain


def test_vllm_updates_are_padded_to_the_step_maximum():
    K = Length.mean_max(300.0, 1000)
    base = Recipe(engine="vllm", completion_len=K, prompts_per_step=8, group_size=4)
    padded = step_cost(base).step_phases["update"]
    packed = step_cost(base.with_(update_padding="none")).step_phases["update"]
    assert padded > 1.5 * packed


# -- distributions ----------------------------------------------------------------------------------------------

def _brute(fn, *dists):
    """E[fn(...)] by summing over the whole joint support (the definition of the expectation)."""
    total = 0.0
    if len(dists) == 1:
        for k, p in zip(dists[0].support, dists[0].probs, strict=True):
            total += p * fn(k)
        return total
    for a, pa in zip(dists[0].support, dists[0].probs, strict=True):
        for b, pb in zip(dists[1].support, dists[1].probs, strict=True):
            total += pa * pb * fn(a, b)
    return total


def test_vllm_rollout_expectation_uses_the_second_moment():
    K = Length.mean_max(300.0, 600)
    recipe = Recipe(policy="qwen2.5-0.5b", engine="vllm", prompts_per_step=2, group_size=4,
                    prompt_len=Length.fixed(64), completion_len=K, lora_rank=None)
    spec = REGISTRY["qwen2.5-0.5b"]
    decode = step_cost(recipe).step_phases["rollout.decode"]
    exact = _brute(lambda k: sum(v for key, v in generate_flops(spec, 8, 64, k).items()
                                 if key.startswith("decode/")), K)
    assert decode == pytest.approx(exact, rel=1e-12)
    naive = sum(v for key, v in generate_flops(spec, 8, 64, round(K.mean)).items() if key.startswith("decode/"))
    assert abs(naive - exact) / exact > 1e-4  # E[K]^2 would be wrong


def test_hf_rollout_runs_to_the_expected_batch_maximum():
    P, K = Length.empirical([10, 20, 40]), Length.mean_max(100.0, 300)
    recipe = Recipe(policy="qwen2.5-0.5b", engine="hf", prompts_per_step=3, group_size=4, prompt_len=P,
                    completion_len=K, lora_rank=None)
    spec = REGISTRY["qwen2.5-0.5b"]
    rollout = step_cost(recipe).step_phases
    pmax, kmax = P.max_of(3), K.max_of(12)
    exact = _brute(lambda p, k: generate_flops(spec, 12, p, k).total, pmax, kmax)
    assert rollout["rollout.prefill"] + rollout["rollout.decode"] == pytest.approx(exact, rel=1e-12)
    assert kmax.mean > K.mean + 50  # padding waste is visible


@pytest.mark.slow
def test_update_expectation_matches_brute_force_with_padding_and_without():
    """Packed: each sequence at its own lengths. Padded (TRL): every micro-batch runs at the generation batch's
    longest prompt and completion."""
    P, K = Length.mean_max(50.0, 120), Length.mean_max(200.0, 400)
    spec = REGISTRY["qwen2.5-0.5b"]
    training = Training(LoRA(8), "non-reentrant")
    for padding, batch in (("none", 1), ("batch", 4)):
        recipe = Recipe(policy="qwen2.5-0.5b", lora_rank=8, prompts_per_step=2, group_size=4, prompt_len=P,
                        completion_len=K, update_padding=padding, micro_batch=4, logprob_head="completion")
        got = step_cost(recipe).step_phases["update"]
        dp, dk = (P, K) if padding == "none" else (P.max_of(2), K.max_of(8))
        exact = _brute(lambda p, k, b=batch: train_flops(spec, b, p + k, k + 1, training).total, dp, dk)
        assert got == pytest.approx(exact * 8 / batch, rel=1e-12)
