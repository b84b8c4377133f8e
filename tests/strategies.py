"""Hypothesis strategies shared by the test modules: random GRPO recipes (``recipes``: the small Qwen2.5 sizes at
realistic lengths; ``round_recipes``: tiny shapes with every trait of a round drawn)."""

from __future__ import annotations

from hypothesis import strategies as st

from flopplan.lengths import Length
from flopplan.recipe import Recipe, RewardSystem

SMALL = ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b")


@st.composite
def recipes(draw, fixed: bool = False):
    """A valid recipe: batch sizes that divide, modes each engine can run, each length fixed or MEAN:MAX at
    random (always fixed with ``fixed``)."""
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


ROUND_POLICIES = ("tiny", "qwen2.5-0.5b")


@st.composite
def round_recipes(draw: st.DrawFn, fixed: bool = True, default_batches: bool = False, evaluation: bool = True,
                  engines: tuple[str, ...] = ("hf", "vllm")) -> Recipe:
    """A valid recipe of tiny shapes with every trait of a round drawn: engine, batches that divide, evaluation,
    LoRA, mu, beta, old log-probs, checkpointing, log-prob head, padding, rule/ORM/PRM."""
    engine = draw(st.sampled_from(engines))
    group, prompts = draw(st.sampled_from([1, 2, 4])), draw(st.sampled_from([1, 2, 3]))
    rollouts = group * prompts
    divisors = [d for d in range(1, rollouts + 1) if rollouts % d == 0]
    generation = micro = optimizer = None
    if not default_batches:
        generation = draw(st.sampled_from([None, *divisors])) if engine == "hf" else None
        micro = draw(st.sampled_from([None, *divisors]))
        m = micro or min(group, rollouts)
        optimizer = draw(st.sampled_from([None, *[d for d in divisors if d % m == 0]]))
    if fixed:
        prompt_len, completion_len = (Length.fixed(draw(st.integers(lo, hi))) for lo, hi in ((3, 40), (2, 24)))
    else:
        prompt_len = Length.mean_max(draw(st.floats(4, 30)), 40)
        completion_len = Length.mean_max(draw(st.floats(3, 20)), 24)
    evals: dict = {}
    if evaluation and draw(st.booleans()):
        e = draw(st.sampled_from([2, 4]))
        evals = {"eval_every": 2, "eval_prompts": e, "eval_batch": draw(st.sampled_from([None, 1, 2])),
                 "eval_prompt_len": Length.fixed(draw(st.integers(3, 30))) if draw(st.booleans()) else None}
    return Recipe(
        policy=draw(st.sampled_from(ROUND_POLICIES)), lora_rank=draw(st.sampled_from([None, 4])),
        prompts_per_step=prompts, group_size=group, prompt_len=prompt_len, completion_len=completion_len,
        iterations=draw(st.integers(1, 3)), beta=draw(st.sampled_from([0.0, 0.04])),
        old_logprobs=draw(st.sampled_from(["auto", "on"])), grad_ckpt=draw(st.booleans()),
        logprob_head=draw(st.sampled_from(["completion", "all", "fused", "fused-compact"])), engine=engine,
        prefix_sharing=engine == "vllm" and draw(st.booleans()), generation_batch=generation, micro_batch=micro,
        update_padding=draw(st.sampled_from(["batch", "none"])), optimizer_batch=optimizer,
        reward=RewardSystem.parse(draw(st.sampled_from(["rule", "orm:tiny", "prm:tiny"]))),
        prm_steps=draw(st.integers(1, 4)), reward_overhead_tokens=draw(st.integers(0, 8)), **evals)
