"""GRPO step cost and the planner: invariants, exactness per phase, expectations, inverse modes, observations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flopplan.arch import QWEN25_SIZES, REGISTRY, orm_head, with_head
from flopplan.budget import Budget
from flopplan.cost import BUCKETS, step_cost
from flopplan.errors import UserError
from flopplan.formulas import (
    LoRA,
    Training,
    decode_flops,
    forward_flops,
    generate_flops,
    train_flops,
)
from flopplan.grid import plan_grid
from flopplan.hardware import datasheet_profile
from flopplan.lengths import Length
from flopplan.planner import compare_models, compare_rewards, plan
from flopplan.recipe import Recipe, RewardSystem
from flopplan.solver import largest_model, learning_share, solve, solve_share

SMALL = ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b")


# -- strategies -------------------------------------------------------------------------------------------------

@st.composite
def recipes(draw, fixed: bool = False):
    group = draw(st.sampled_from([1, 2, 4, 8, 16]))
    prompts = draw(st.sampled_from([1, 2, 8, 32]))
    rollouts = group * prompts

    def length(lo, hi):
        n = draw(st.integers(lo, hi))
        if fixed or draw(st.booleans()):
            return Length.fixed(n)
        top = draw(st.integers(n, hi * 2))
        return Length.mean_max(float(draw(st.integers(1, top))), top)

    engine = draw(st.sampled_from(["hf", "vllm"]))
    lora = draw(st.one_of(st.none(), st.sampled_from([8, 64])))
    reward = draw(st.sampled_from(["rule", "orm:qwen2.5-0.5b", "prm", "prm:qwen2.5-0.5b"]))
    evaluate = draw(st.booleans())
    iterations = draw(st.integers(1, 4))
    # "off" with several optimizer steps a round is refused under HF generate (the clip would never act)
    modes = ["auto", "on", "off"] if engine == "vllm" or iterations == 1 else ["auto", "on"]
    return Recipe(
        policy=draw(st.sampled_from(SMALL)), lora_rank=lora, prompts_per_step=prompts, group_size=group,
        prompt_len=length(1, 600), completion_len=length(1, 1500), iterations=iterations,
        beta=draw(st.sampled_from([0.0, 0.04])), old_logprobs=draw(st.sampled_from(modes)),
        grad_ckpt=draw(st.booleans()), engine=engine,
        logprob_head=draw(st.sampled_from(["completion", "all", "fused", "fused-compact"])),
        prefix_sharing=engine == "vllm" and draw(st.booleans()),
        micro_batch=draw(st.sampled_from([d for d in (1, 2, 4, 8) if rollouts % d == 0])),
        update_padding=draw(st.sampled_from(["batch", "none"])), reward=RewardSystem.parse(reward),
        eval_every=draw(st.integers(1, 20)) if evaluate else None, eval_prompts=8 if evaluate else 0,
        eval_at_start=draw(st.booleans()))


budgets = st.floats(1e15, 1e21).map(lambda x: int(x))


# -- invariants -------------------------------------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(recipes(), budgets)
def test_plan_invariants(recipe, budget_flops):
    p = plan(recipe, Budget(flops=budget_flops))
    flops = p.flops
    assert flops["total"] == sum(flops[b] for b in BUCKETS)
    assert sum(p.phases.values()) == flops["total"]
    assert flops["total"] <= budget_flops
    assert p.leftover_flops == budget_flops - flops["total"] >= 0
    # one more step (and the evaluation it may bring) would not fit
    cost = p.cost
    nxt = p.steps + 1
    more = nxt * cost.step_flops + recipe.evaluations(nxt) * cost.eval_flops
    assert more > budget_flops - 1  # -1: totals of distributions are rounded per phase
    assert p.evaluations == (recipe.evaluations(p.steps) if p.total_flops else 0)
    for value in flops.values():
        assert isinstance(value, int)


@settings(max_examples=100, deadline=None)
@given(recipes(fixed=True), st.integers(1, 10_000))
def test_costs_are_linear_in_steps(recipe, steps):
    """With a budget of exactly k steps, every step phase is k times its per-step cost."""
    cost = step_cost(recipe)
    budget = steps * cost.step_flops + recipe.evaluations(steps) * cost.eval_flops
    p = plan(recipe, Budget(flops=budget))
    assert p.steps == steps
    assert p.leftover_flops == 0
    for phase, per_step in cost.step_phases.items():
        assert p.phases[phase] == steps * per_step
    for phase, per_eval in cost.eval_phases.items():
        assert p.phases[phase] == recipe.evaluations(steps) * per_eval


def test_evaluations_count_the_baseline():
    recipe = Recipe(eval_every=10, eval_prompts=20)
    assert [recipe.evaluations(s) for s in (0, 9, 10, 25)] == [1, 1, 2, 3]
    assert recipe.with_(eval_at_start=False).evaluations(25) == 2
    cost = step_cost(recipe)
    tiny = plan(recipe, Budget(flops=cost.eval_flops // 2))  # not even the baseline evaluation fits
    assert tiny.steps == 0 and tiny.total_flops == 0


def test_budget_too_small_says_what_a_step_costs():
    p = plan(Recipe(policy="qwen2.5-7b"), Budget(flops=10**12))
    assert p.steps == 0 and "one step costs" in p.notes[0]


# -- each phase equals the FLOP model's exact formula ----------------------------------------------------------

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


def test_old_logprobs_auto_follows_optimizer_steps_per_round():
    assert not Recipe().computes_old_logprobs
    assert Recipe(iterations=2).computes_old_logprobs
    assert Recipe(optimizer_batch=128).computes_old_logprobs  # 512 rollouts feed 4 optimizer steps
    assert Recipe(engine="vllm").computes_old_logprobs
    assert not Recipe(iterations=2, old_logprobs="off", engine="vllm").computes_old_logprobs  # verl's bypass
    with pytest.raises(UserError, match="clip never acts"):  # what the built-in trainer and TRL cannot run
        Recipe(iterations=2, old_logprobs="off")


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


def test_orm_head_and_prm_head():
    spec = REGISTRY["qwen2.5-1.5b"]
    orm = RewardSystem.parse("orm:qwen2.5-1.5b").spec()
    assert orm.head == orm_head(spec)
    assert orm.params == with_head(spec, orm_head(spec)).params
    prm = RewardSystem.parse("prm:qwen2.5-1.5b").spec()
    assert [(lay.in_features, lay.out_features) for lay in prm.head.layers] == [(1536, 1536), (1536, 2)]
    assert RewardSystem.parse("prm").spec() is REGISTRY["qwen2.5-math-prm-7b"]


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


@pytest.mark.parametrize(("mean", "top"), [(100.0, 20480), (5.0, 1024), (1.01, 1024), (1020.0, 1024),
                                           (1023.9, 1024), (60000.0, 131072), (512.5, 1024)])
def test_mean_max_reaches_the_requested_mean_anywhere_in_its_range(mean, top):
    d = Length.mean_max(mean, top)
    assert d.mean == pytest.approx(mean, rel=1e-9) and d.max == top and abs(sum(d.probs) - 1) < 1e-12


def test_length_distributions():
    d = Length.mean_max(600.0, 1024)
    assert d.mean == pytest.approx(600, rel=1e-9) and d.max == 1024 and d.min == 1
    assert Length.mean_max(512.5, 1024).variance() == pytest.approx((1024**2 - 1) / 12, rel=1e-6)  # uniform
    assert Length.parse("7").is_fixed and Length.parse({"mean": 3, "max": 9}).max == 9
    m = Length.empirical([1, 2, 3, 4]).max_of(2)
    assert m.probs == pytest.approx((1 / 16, 3 / 16, 5 / 16, 7 / 16))
    for bad in ("x", "0", "5:3", {"mean": 3}, -1, "@/no/such/file", "500:100000000000", "nan:100",
                {"counts": {"5": 0}}, {"counts": {"0": 3}}):
        with pytest.raises(UserError):
            Length.parse(bad)


def test_lengths_from_files(tmp_path):
    lines = tmp_path / "lengths.txt"
    lines.write_text("10\n20\n20\n")
    as_json = tmp_path / "lengths.json"
    as_json.write_text("[10, 20, 20]")
    jsonl = tmp_path / "lengths.jsonl"
    jsonl.write_text('{"length": 10}\n{"length": 20}\n{"length": 20}\n')
    for path in (lines, as_json, jsonl):
        d = Length.from_file(path)
        assert d.support == (10, 20) and d.probs == pytest.approx((1 / 3, 2 / 3))
    bad = tmp_path / "bad.txt"
    bad.write_text("ten\n")
    with pytest.raises(UserError, match="malformed"):
        Length.from_file(bad)


# -- the seed paper's two observations --------------------------------------------------------------------------

@pytest.mark.parametrize("budget", [10**18, 10**19, 10**20])
@pytest.mark.parametrize("reward", ["rule", "prm:qwen2.5-math-prm-7b"])
def test_larger_policies_get_fewer_updates_and_rollouts_at_equal_flops(budget, reward):
    plans = compare_models(Recipe(reward=RewardSystem.parse(reward)), list(QWEN25_SIZES), Budget(flops=budget))
    steps = [p.steps for p in plans]
    rollouts = [p.totals()["rollouts"] for p in plans]
    updates = [p.totals()["update_tokens"] for p in plans]
    assert steps == sorted(steps, reverse=True) and steps[0] > steps[-1]
    assert rollouts == sorted(rollouts, reverse=True) and updates == sorted(updates, reverse=True)
    per_token = [p.cost.step_flops for p in plans]
    assert per_token == sorted(per_token)


@pytest.mark.parametrize("policy", ["qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b", "qwen2.5-14b"])
def test_rule_reward_leaves_non_update_compute_to_rollouts_prm_takes_a_visible_share(policy):
    budget = Budget(flops=10**19)
    rule, prm, small_prm = compare_rewards(Recipe(), ["rule", "prm:qwen2.5-math-prm-7b", "prm:qwen2.5-1.5b"],
                                           budget, [policy])
    rule_shares = rule.shares()
    assert rule.phases.get("reward", 0) == 0 and rule_shares["feedback"] == 0
    non_update = rule.total_flops - rule.flops["learning"]
    assert non_update == rule.phases["rollout.prefill"] + rule.phases["rollout.decode"] > 0
    assert prm.shares()["feedback"] > 0.10  # a visible part of the budget (Qwen2.5-Math-PRM-7B)
    assert 0 < small_prm.shares()["feedback"] < prm.shares()["feedback"]  # a smaller PRM takes less
    assert prm.steps < small_prm.steps <= rule.steps


# -- budgets in time and money ----------------------------------------------------------------------------------

def test_gpu_hour_and_dollar_budgets():
    profile = datasheet_profile("h100", "hf", price_per_hour=2.0)
    by_hours = plan(Recipe(), Budget(gpu_hours=100), profile)
    by_dollars = plan(Recipe(), Budget(dollars=200), profile)
    assert by_hours.steps == by_dollars.steps > 0
    assert by_hours.gpu_hours <= 100
    assert by_dollars.dollars == pytest.approx(by_hours.gpu_hours * 2.0)
    # decode is bound by the weights and KV cache it reads: each of its FLOPs takes longer than an update's
    per_flop = {ph: by_hours.seconds[ph] / by_hours.phases[ph] for ph in ("rollout.decode", "update")}
    assert per_flop["rollout.decode"] > 2 * per_flop["update"]
    with pytest.raises(UserError, match="profile"):
        plan(Recipe(), Budget(gpu_hours=1))
    with pytest.raises(UserError, match="price"):
        plan(Recipe(), Budget(dollars=1), datasheet_profile("a100"))


def test_budget_validation():
    for bad in ({}, {"flops": -1}, {"flops": 1, "gpu_hours": 2}, {"gpu_hours": math.inf}):
        with pytest.raises(UserError):
            Budget(**bad)


# -- inverse modes ----------------------------------------------------------------------------------------------

def test_the_api_name_solve_is_the_function_once_its_module_is_loaded():
    """The solves live in flopplan/solver.py: loading that module must leave the API's ``flopplan.solve``."""
    import importlib

    import flopplan

    module = importlib.import_module("flopplan.solver")
    assert flopplan.solve is module.solve is solve


@pytest.mark.parametrize("flops", [10**19, 10**23])  # 1e23: the answer lies beyond 2^20
@pytest.mark.parametrize("free", ["group_size", "prompts_per_step", "iterations"])
def test_solve_finds_the_largest_value_that_affords_the_steps(free, flops):
    budget = Budget(flops=flops)
    solved = solve(Recipe(), budget, free, steps=300)
    value = getattr(solved.recipe, free)
    assert solved.steps >= 300
    assert plan(Recipe().with_(**{free: value + 1}), budget).steps < 300


def test_solve_share_and_largest_model():
    recipe, share, notes = solve_share(Recipe(), 0.9, "iterations")
    assert abs(share - 0.9) <= abs(learning_share(recipe.with_(iterations=recipe.iterations + 1)) - 0.9)
    assert abs(share - 0.9) <= abs(learning_share(recipe.with_(iterations=max(1, recipe.iterations - 1))) - 0.9)
    with pytest.raises(UserError, match="does not depend on group_size"):  # fixed lengths: G scales everything
        solve_share(Recipe(), 0.05, "group_size")
    _, _, notes = solve_share(Recipe(completion_len=Length.mean_max(300.0, 1024)), 0.05, "group_size")
    assert notes and "outside" in notes[0]  # padded batches: the share moves a little with G, not to 5 %
    best = largest_model(Recipe(), Budget(flops=10**19), steps=300)
    bigger = QWEN25_SIZES[QWEN25_SIZES.index(best.model) + 1]
    assert best.steps >= 300 and plan(Recipe(policy=bigger), Budget(flops=10**19)).steps < 300
    with pytest.raises(UserError):
        largest_model(Recipe(), Budget(flops=10**15), steps=300)


# -- vectorized grids -------------------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1, 4, 16]), st.sampled_from([2, 8]), st.integers(1, 500),
                          st.integers(1, 3000), st.integers(1, 3)), min_size=1, max_size=8),
       st.sampled_from(SMALL), st.sampled_from(["rule", "prm:qwen2.5-math-prm-7b"]), st.booleans(),
       st.sampled_from([0.0, 0.04]))
def test_grid_equals_the_scalar_planner(rows, policy, reward, vllm, beta):
    """Default arguments on both sides: the grid follows the recipe's rules (old logprobs auto, beta)."""
    Q, G, P, K, mu = (np.array(col) for col in zip(*rows, strict=True))
    system = RewardSystem.parse(reward)
    budgets = [1e17, 3e19]
    engine = "vllm" if vllm else "hf"
    grid = plan_grid(Recipe(policy=policy, reward=system, engine=engine, beta=beta), budgets, prompts_per_step=Q,
                     group_size=G, prompt_len=P, completion_len=K, iterations=mu)
    for i, (q, g, p, k, m) in enumerate(rows):
        recipe = Recipe(policy=policy, prompts_per_step=q, group_size=g, prompt_len=Length.fixed(p),
                        completion_len=Length.fixed(k), iterations=m, reward=system, engine=engine, beta=beta)
        cost = step_cost(recipe)
        assert grid.step_flops[i] == pytest.approx(cost.step_flops, rel=1e-12)
        for b, value in cost.buckets().items():
            assert grid.bucket_step_flops[b][i] == pytest.approx(value, rel=1e-12)
        for j, budget in enumerate(budgets):
            assert grid.steps[i, j] == plan(recipe, Budget(flops=budget)).steps
            assert grid.flops["total"][i, j] <= budget


def test_huge_budgets_are_planned_exactly_or_refused():
    p = plan(Recipe(policy="qwen2.5-0.5b"), Budget(flops=10**29))
    assert p.total_flops <= 10**29 < p.total_flops + p.cost.step_flops
    for bad in ({"flops": 10**31}, {"flops": 10**400}, {"gpu_hours": 1e300}, {"flops": float("nan")}):
        with pytest.raises(UserError):
            Budget(**bad)


def test_vllm_updates_are_padded_to_the_step_maximum():
    K = Length.mean_max(300.0, 1000)
    base = Recipe(engine="vllm", completion_len=K, prompts_per_step=8, group_size=4)
    padded = step_cost(base).step_phases["update"]
    packed = step_cost(base.with_(update_padding="none")).step_phases["update"]
    assert padded > 1.5 * packed


def test_solve_keeps_the_recipe_batch_sizes():
    recipe = Recipe(policy="qwen2.5-1.5b", generation_batch=128, micro_batch=16)
    solved = solve(recipe, Budget(flops=10**19), "group_size", steps=1600)
    assert solved.recipe.generation_batch == 128 and solved.recipe.micro_batch == 16
    assert solved.recipe.rollouts_per_step % 128 == 0 and solved.steps >= 1600


# -- recipes ----------------------------------------------------------------------------------------------------

@settings(max_examples=50, deadline=None)
@given(recipes())
def test_recipe_round_trips_through_toml_and_json(tmp_path_factory, recipe):
    folder = tmp_path_factory.mktemp("recipes")
    for name in ("r.toml", "r.json"):
        path = recipe.save(folder / name)
        assert Recipe.load(path) == recipe


BAD_RECIPES = {
    "unknown key": {"polcy": "qwen2.5-7b"},
    "negative group": {"group_size": -2},
    "zero prompts": {"prompts_per_step": 0},
    "bad beta": {"beta": -0.1},
    "bad engine": {"engine": "sglang"},
    "prefix sharing with hf": {"prefix_sharing": True},
    "micro batch not dividing": {"micro_batch": 7},
    "bad reward": {"reward": "dpo"},
    "orm without model": {"reward": "orm"},
    "bad lora": {"lora": {"rank": 8, "targets": ["lm_head"]}},
    "eval without prompts": {"eval_every": 10},
    "bad length": {"completion_len": {"mean": 5000, "max": 100}},
    "string bool": {"grad_ckpt": "false"},
    "string eval start": {"eval_at_start": "no"},
    "numeric policy": {"policy": 5},
    "numeric targets": {"lora": {"rank": 8, "targets": [1, 2]}},
}


@pytest.mark.parametrize("case", sorted(BAD_RECIPES))
def test_bad_recipes_are_refused(case):
    with pytest.raises(UserError):
        Recipe.from_data(BAD_RECIPES[case])


def test_policy_must_be_a_language_model():
    with pytest.raises(UserError, match="score head"):
        plan(Recipe(policy="qwen2.5-math-prm-7b"), Budget(flops=10**19))


def test_decode_steps_priced_as_one_array_equal_the_step_by_step_sum():
    """The time model prices a rollout's decode steps in one numpy evaluation; that equals pricing each step
    (step j: context prompt + j, FLOPs from the decode formula, KV cache of prompt + j + 1 tokens) on its own."""
    from flopplan.formulas import decode_flops
    from flopplan.timing import Call, call_seconds, phase_calls

    params = {"throughput": 2e11, "bandwidth": 8e11, "overhead": 1e-3, "overhead_layer": 2e-4}
    recipe = Recipe(policy="qwen2.5-0.5b", prompt_len=Length.fixed(100), completion_len=Length.fixed(300))
    [(count, series)] = phase_calls(recipe)["rollout.decode"]
    vectorised = count * call_seconds("roofline", params, series, 2.0)
    spec, batch = recipe.policy_spec, recipe.generation_batch_size
    looped = 0.0
    for j in range(299):
        flops = decode_flops(spec, batch, 100 + j, recipe.rollout_lora, recipe.conventions).total
        kv = batch * (100 + j + 1) * 2 * spec.num_layers * spec.kv_dim
        looped += count * call_seconds("roofline", params, Call(float(flops), batch, spec.params, kv,
                                                                 spec.num_layers), 2.0)
    assert len(series.flops) == 299 and vectorised == pytest.approx(looped, rel=1e-12)


def test_sequences_beyond_the_model_context_are_noted():
    long = plan(Recipe(policy="qwen2.5-0.5b", completion_len=Length.fixed(40000)), Budget(flops=10**21))
    short = plan(Recipe(policy="qwen2.5-0.5b"), Budget(flops=10**21))
    assert any("32,768-token context" in n for n in long.notes)
    assert not any("context" in n for n in short.notes)
