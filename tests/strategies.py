"""Hypothesis strategies shared by the test modules: random GRPO recipes over the small Qwen2.5 sizes."""

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
