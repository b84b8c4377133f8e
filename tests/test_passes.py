"""One definition of a round, four evaluations: the step cost, the budget guard's worst case, the time model's
calls and the vectorized grid all come from `step_passes`, and agree with each other and with an independent
oracle written from the formulas, over random recipes (eval rounds, beta > 0, mu > 1, vllm, ORM and PRM)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import round_recipes as recipes

from flopplan.cost import step_cost, worst_case_round
from flopplan.formulas import Training, forward_flops, generate_flops, train_flops
from flopplan.passes import BUCKET_OF, BUCKETS, ENGINE_PHASES, step_passes
from flopplan.recipe import Recipe, RewardSystem
from flopplan.timing import phase_calls


def head_of(r: Recipe, p: int, k: int) -> int:
    """Positions per row the log-prob head projects, as TRL's code does (every completion at its own length k)."""
    return {"completion": k + 1, "all": p + k, "fused": p + k - 1, "fused-compact": k}[r.logprob_head]


def rollout_lora(r: Recipe):
    """Adapters active in generation, as the engines run them: HF generate the peft model, vLLM merged weights."""
    return r.lora if r.engine == "hf" else None


def old_logprobs_oracle(r: Recipe) -> bool:
    """TRL's rule: recomputed when a round feeds several optimizer steps, or for vLLM's correction."""
    return r.old_logprobs == "on" or (r.old_logprobs == "auto" and (r.optimizer_steps_per_round > 1
                                                                      or r.engine == "vllm"))


def update_oracle(r: Recipe, rows: int, p: int, k: int) -> int:
    """One update pass: forward + backward (+ checkpoint recompute) with an ordinary head, and for the fused
    heads the head's forward matmul once more (the chunked backward recomputes each logit tile)."""
    spec, conv = r.policy_spec, r.conventions
    plain = Training(r.lora, "non-reentrant" if r.grad_ckpt else "none")
    flops = train_flops(spec, rows, p + k, head_of(r, p, k), plain, conv).total
    if r.logprob_head in ("fused", "fused-compact"):
        flops += 2 * rows * head_of(r, p, k) * spec.hidden_size * spec.vocab_size
    return flops


def oracle_round(r: Recipe) -> dict[str, int]:
    """One round of a fixed-length recipe, written out from the formulas without the passes: what each engine
    runs (HF generate calls of the generation batch; vLLM per sequence, the prefill once per prompt with prefix
    sharing; no padding since every length is the same)."""
    spec, conv, P, K = r.policy_spec, r.conventions, r.prompt_len.max, r.completion_len.max
    n = r.rollouts_per_step
    out: dict[str, int] = {}
    prefill_rows = r.prompts_per_step if r.prefix_sharing else n
    gen = generate_flops(spec, n, P, K, rollout_lora(r), conv)
    out["rollout.prefill"] = sum(v for k, v in gen.items() if k.startswith("prefill/")) * prefill_rows // n
    out["rollout.decode"] = sum(v for k, v in gen.items() if k.startswith("decode/"))
    head = head_of(r, P, K)
    if old_logprobs_oracle(r):
        out["old_logprobs"] = forward_flops(spec, n, P + K, head, r.lora, conv).total
    if r.beta > 0:
        out["reference"] = forward_flops(spec, n, P + K, head, None, conv).total
    out["update"] = r.iterations * update_oracle(r, n, P, K)
    if r.reward_spec is not None:
        t = P + K + r.reward_overhead_tokens + (r.prm_steps if r.reward.kind == "prm" else 0)
        out["reward"] = forward_flops(r.reward_spec, n, t, t, None, conv).total
    if r.eval_every is not None:
        e, EP, EK = r.eval_prompts, r.evaluation_prompt_len.max, r.evaluation_completion_len.max
        ev = generate_flops(spec, e, EP, EK, rollout_lora(r), conv)
        out["eval.prefill"] = sum(v for k, v in ev.items() if k.startswith("prefill/"))
        out["eval.decode"] = sum(v for k, v in ev.items() if k.startswith("decode/"))
    return out


@settings(max_examples=60, deadline=None)
@given(recipes())
def test_step_cost_equals_an_oracle_written_from_the_formulas(recipe):
    cost = step_cost(recipe)
    assert {**cost.step_phases, **cost.eval_phases} == oracle_round(recipe)


@settings(max_examples=60, deadline=None)
@given(recipes())
def test_worst_case_of_fixed_lengths_is_the_step_cost(recipe):
    """With every prompt at its (fixed) length and every completion at the maximum, the guard's bound is exactly
    the round's cost, and its evaluation exactly one evaluation's."""
    cost = step_cost(recipe)
    rows = recipe.rollouts_per_step
    prompts = [recipe.prompt_len.max] * rows
    k = recipe.completion_len.max
    assert worst_case_round(recipe, prompts, k) == cost.step_flops
    if recipe.eval_every is not None:
        e = [recipe.evaluation_prompt_len.max] * recipe.eval_prompts
        both = worst_case_round(recipe, prompts, k, eval_prompt_tokens=e, evaluation=True)
        assert both == cost.step_flops + cost.eval_flops
        assert worst_case_round(recipe, None, k, eval_prompt_tokens=e, round_phases=False,
                                evaluation=True) == cost.eval_flops


@settings(max_examples=60, deadline=None)
@given(recipes(engines=("hf",)), st.data())
def test_worst_case_with_observed_prompts_equals_an_oracle(recipe, data):
    """Prompts of different lengths (HF generate): each generate call is padded to its longest prompt, each
    scoring/update micro-batch to the widest generate call it holds rows of (packed: each row its own), the
    reward model reads each row at its own length; every completion at the maximum."""
    r = recipe
    lengths = [data.draw(st.integers(1, 30)) for _ in range(r.prompts_per_step)]
    prompts = [p for p in lengths for _ in range(r.group_size)]
    spec, conv, n, k = r.policy_spec, r.conventions, r.generation_batch_size, r.completion_len.max
    block = [max(prompts[i - i % n:i - i % n + n]) for i in range(len(prompts))]  # each row's call width
    expected = sum(generate_flops(spec, n, block[i], k, rollout_lora(r), conv).total for i in range(0, len(block), n))
    m = r.micro_batch_size if r.update_padding == "batch" else 1
    widths = [max(block[j:j + m]) if r.update_padding == "batch" else prompts[j] for j in range(0, len(block), m)]

    for p in widths:
        if old_logprobs_oracle(r):
            expected += forward_flops(spec, m, p + k, head_of(r, p, k), r.lora, conv).total
        if r.beta > 0:
            expected += forward_flops(spec, m, p + k, head_of(r, p, k), None, conv).total
        expected += r.iterations * update_oracle(r, m, p, k)
    if r.reward_spec is not None:
        extra = r.reward_overhead_tokens + (r.prm_steps if r.reward.kind == "prm" else 0)
        expected += sum(forward_flops(r.reward_spec, 1, p + k + extra, p + k + extra, None, conv).total
                        for p in prompts)
    assert worst_case_round(r, prompts, k) == expected


@settings(max_examples=40, deadline=None)
@given(recipes(fixed=False))
def test_worst_case_bounds_the_expected_cost_of_any_length_distribution(recipe):
    rows = recipe.rollouts_per_step
    bound = worst_case_round(recipe, [recipe.prompt_len.max] * rows, recipe.completion_len.max)
    assert step_cost(recipe).step_flops <= bound * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(recipes())
def test_time_model_calls_carry_the_step_cost_flops(recipe):
    """The calls a time model prices hold, phase by phase, exactly the FLOPs of the step (fixed lengths)."""
    cost = step_cost(recipe)
    calls = phase_calls(recipe)
    assert set(calls) <= set(cost.phases)
    for phase, value in {**cost.step_phases, **cost.eval_phases}.items():
        priced = sum(count * float(np.sum(call.flops)) for count, call in calls.get(phase, []))
        if phase.endswith("decode") and recipe.completion_len.max == 1:
            continue
        assert priced == pytest.approx(value, rel=1e-12), phase


def test_every_pass_belongs_to_a_phase_and_a_bucket():
    from flopplan.passes import RoundLengths, RoundShape

    r = Recipe(beta=0.1, iterations=2, reward=RewardSystem.parse("prm"), eval_every=5, eval_prompts=8)
    passes = step_passes(RoundShape.of(r), RoundLengths.of(r))
    assert {p.phase for p in passes} == set(BUCKET_OF) - set(ENGINE_PHASES)  # those: TRL's evaluation, metered
    assert {p.bucket for p in passes} == set(BUCKETS)
    update = next(p for p in passes if p.phase == "update")
    assert update.count == 2 * r.rollouts_per_step // r.micro_batch_size and update.training == Training(
        r.lora, "non-reentrant", head_recompute=True)  # TRL's default: checkpointing, a fused head
    reference = next(p for p in passes if p.phase == "reference")
    assert reference.lora is None and next(p for p in passes if p.phase == "old_logprobs").lora == r.lora
