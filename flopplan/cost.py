"""Recipe -> StepCost: the FLOPs of one GRPO step (one generation round) by phase, grouped into buckets; and the
worst case of the next round, the budget guard every runner uses.

Both evaluate :func:`flopplan.passes.step_passes`, the one description of a round's passes (phases, models,
adapters, calls, padding). The phases and what each charges:

=================  ==========  ==================================================================================
phase              bucket      FLOPs
=================  ==========  ==================================================================================
rollout.prefill    rollout     prompt prefill of every rollout (``generate``: last-position logits); with vLLM
                               prefix sharing once per prompt instead of once per sample
rollout.decode     rollout     the decode steps of every rollout (adapters active under HF generate; TRL merges
                               LoRA into the weights it syncs to vLLM)
old_logprobs       learning    a no-grad policy forward over prompt + completion (when recomputed)
reference          learning    a no-grad forward of the reference (the base, adapter disabled) when beta > 0
update             learning    ``iterations`` x forward + backward (+ recompute) over prompt + completion
reward             feedback    the reward model's forward over each templated completion (none for rules)
eval.prefill/      evaluation  greedy ``generate`` over the eval set, once per evaluation (every k steps)
eval.decode
=================  ==========  ==================================================================================

Lengths: per-phase costs are polynomials of degree <= 2 in the prompt and completion lengths, so their
expectation is exact with the two-point rules of :mod:`flopplan.lengths`; padded batches (HF generate; TRL's
scoring and update passes, padded once for the whole generation batch) use the distribution of the batch
maximum. Fixed lengths give exact integers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from flopplan.attention import Num
from flopplan.breakdown import Breakdown
from flopplan.lengths import Observed
from flopplan.passes import (
    EVAL_PHASES,
    STEP_PHASES,
    RoundLengths,
    RoundPass,
    RoundShape,
    by_bucket,
    mean_of,
    pass_flops,
    reward_extra_tokens,
    step_passes,
)
from flopplan.recipe import Recipe

# -- the expected step ------------------------------------------------------------------------------------------

@dataclass
class StepCost:
    """FLOPs of one GRPO step by phase (and of one evaluation), with the counts they buy."""

    recipe: Recipe
    phases: dict[str, Breakdown]  # per step; eval.* phases per evaluation run
    counts: dict[str, float] = field(default_factory=dict)  # per step

    def phase_total(self, phase: str) -> Num:
        return self.phases[phase].total if phase in self.phases else 0

    @property
    def step_phases(self) -> dict[str, Num]:
        return {phase: self.phase_total(phase) for phase in STEP_PHASES if phase in self.phases}

    @property
    def eval_phases(self) -> dict[str, Num]:
        return {phase: self.phase_total(phase) for phase in EVAL_PHASES if phase in self.phases}

    @property
    def step_flops(self) -> Num:
        return sum(self.step_phases.values(), 0)

    @property
    def eval_flops(self) -> Num:
        """FLOPs of one evaluation run (0 without evaluation)."""
        return sum(self.eval_phases.values(), 0)

    def buckets(self) -> dict[str, Num]:
        """Per-step FLOPs by bucket (evaluation: one evaluation run), without the total."""
        out = by_bucket({**self.step_phases, **self.eval_phases})
        out.pop("total")
        return out


def phase_flops(passes: list[RoundPass]) -> dict[str, Breakdown]:
    """FLOPs by phase of a list of passes (a phase may take several passes)."""
    phases: dict[str, Breakdown] = {}
    for p in passes:
        flops = pass_flops(p)
        phases[p.phase] = Breakdown.combine([phases[p.phase], flops]) if p.phase in phases else flops
    return phases


def step_cost(recipe: Recipe) -> StepCost:
    """The per-phase FLOPs of one GRPO step of ``recipe`` (exact integers for fixed lengths)."""
    r = recipe
    passes = step_passes(RoundShape.of(r), RoundLengths.of(r))
    by_phase = {p.phase: p for p in passes}
    rollouts = r.rollouts_per_step
    decode, update = by_phase["rollout.decode"], by_phase["update"]
    counts = {
        "prompts": r.prompts_per_step,
        "rollouts": rollouts,
        "generated_tokens": rollouts * r.completion_len.mean,
        "generated_tokens_executed": rollouts * mean_of(decode.completion),
        "update_tokens": r.iterations * rollouts * (r.prompt_len.mean + r.completion_len.mean),
        "update_tokens_executed": r.iterations * rollouts * (mean_of(update.prompt) + mean_of(update.completion)),
        "optimizer_steps": r.optimizer_steps_per_round,
        "reward_evaluations": rollouts if r.reward_spec is not None else 0,
    }
    return StepCost(r, phase_flops(passes), counts)


# -- the worst case of the next round: the budget guard ---------------------------------------------------------

def worst_case_round(recipe: Recipe, prompt_tokens: Sequence[int] | None, completion_max: int, *,
                     reward_prompt_tokens: Sequence[int] | None = None, reward_extra: int | None = None,
                     eval_prompt_tokens: Sequence[int] | None = None, eval_completion_max: int | None = None,
                     round_phases: bool = True, evaluation: bool = False) -> int:
    """An upper bound of the FLOPs of the next round (and/or of an evaluation), before it runs: every completion
    at ``completion_max`` tokens, each generate call padded to its longest observed prompt.

    ``prompt_tokens``: the prompt tokens of each of the round's rollouts in round order (prompts repeat within a
    group; an engine that does not know its next prompts passes the longest prompt it can see, for every row;
    None: the recipe's longest prompt).
    ``reward_prompt_tokens`` and ``reward_extra``: what the reward model reads (its own tokenizer may count the
    prompt differently; the tokens it adds to each completion); default: the policy's prompt tokens and the
    recipe's template and separators. The guard stops a run before any round for which this does not fit what is
    left, so the budget is never exceeded; the built-in trainer, the TRL meter and RACE all call it.
    """
    r = recipe
    rows = r.rollouts_per_step
    if prompt_tokens is None:
        prompt_tokens = [r.prompt_len.max] * rows
    if len(prompt_tokens) != rows:
        raise ValueError(f"worst_case_round: {len(prompt_tokens)} prompt lengths for {rows} rollouts")
    extra = reward_extra if reward_extra is not None else reward_extra_tokens(r.reward.kind, r.reward_overhead_tokens,
                                                                              r.prm_steps)
    eval_prompts = Observed(tuple(eval_prompt_tokens)) if eval_prompt_tokens is not None \
        else r.evaluation_prompt_len.max
    eval_max = eval_completion_max if eval_completion_max is not None else r.evaluation_completion_len.max
    lengths = RoundLengths(Observed(tuple(prompt_tokens)), completion_max,
                           Observed(tuple(reward_prompt_tokens if reward_prompt_tokens is not None else prompt_tokens)),
                           extra, eval_prompts if evaluation else None, eval_max)
    shape = RoundShape.of(r)
    if not evaluation:
        shape = _without_evaluation(shape)
    total = 0
    for p in step_passes(shape, lengths):
        if (p.bucket == "evaluation" and evaluation) or (p.bucket != "evaluation" and round_phases):
            total += int(pass_flops(p).total)
    return total


def _without_evaluation(shape: RoundShape) -> RoundShape:
    return replace(shape, eval_prompts=0)
