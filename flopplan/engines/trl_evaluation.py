"""TRL's evaluation loop as flopplan's passes: what one ``GRPOTrainer.evaluate`` runs, the phases it is charged to,
and the worst case of one evaluation that the TRL meter's guard keeps in reserve and that ``race design
--eval-loop trl`` prices a script pilot's evaluations at. Torch-free: the design reads it.

What TRL 1.16 runs per evaluation batch (``GRPOTrainer.prediction_step`` -> ``_prepare_inputs`` ->
``_generate_and_score_completions`` in eval mode, ``grpo_trainer.py:2324`` and ``:3294``): ``num_generations_eval``
completions per prompt, sampled as in training (TRL has no greedy evaluation); the same no-grad scoring passes as a
training round (the old-policy forward under the round's own condition, ``:2642``; the reference when beta > 0);
the reward models; then ``compute_loss`` under ``torch.no_grad``: one policy forward, adapters on, no backward.
Each pass is the training round's pass of :func:`flopplan.passes.step_passes` (its model, adapters and head),
charged to the evaluation phase :data:`EVAL_PHASE_OF` names; the loss forward is the update's pass without its
training (:func:`loss_forward`).
"""

from __future__ import annotations

from dataclasses import replace

from flopplan.ledger import charge, ran
from flopplan.passes import RoundLengths, RoundPass, RoundShape, reward_extra_tokens, step_passes
from flopplan.recipe import Recipe

EVAL_PHASE_OF = {"rollout.prefill": "eval.prefill", "rollout.decode": "eval.decode", "old_logprobs": "eval.forward",
                 "reference": "eval.forward", "reward": "eval.reward"}
"""The evaluation phase a training phase's pass is charged to when TRL's evaluation loop runs it."""
SCORING = ("old_logprobs", "reference")
"""The no-grad scoring passes of a round, in the order TRL runs them."""


def round_passes(recipe: Recipe) -> dict[str, RoundPass]:
    """The passes of one of ``recipe``'s training rounds by phase: the templates each unit is charged as."""
    return {p.phase: p for p in step_passes(RoundShape.of(recipe), RoundLengths.of(recipe))}


def as_evaluation(template: RoundPass) -> RoundPass:
    """A training round's pass as TRL's evaluation loop runs it: the same model, adapters and head, its eval phase."""
    return replace(template, phase=EVAL_PHASE_OF[template.phase])


def loss_forward(passes: dict[str, RoundPass]) -> RoundPass:
    """``prediction_step``'s loss: the update's pass without the backward (no-grad, the policy's adapters on)."""
    update = passes["update"]
    assert update.training is not None
    return replace(update, phase="eval.forward", training=None, lora=update.training.lora, repeats=1)


def evaluation_bound(recipe: Recipe, rows: int, prompt: int, *, passes: dict[str, RoundPass] | None = None,
                     reward_prompt: int | None = None, reward_extra: int | None = None) -> int:
    """The worst case of one evaluation by TRL's loop over ``rows`` rows (prompts x ``num_generations_eval``, over
    all processes): every row at ``prompt`` tokens (the evaluation data's longest) and every completion at
    ``max_completion_length``, as one padded batch (smaller batches are padded to at most these widths). A reward
    model reads ``reward_prompt`` (default ``prompt``) plus the completion plus ``reward_extra`` tokens (default:
    the recipe's template and separators). ``passes``: the round's (:func:`round_passes`; read again when None)."""
    passes = round_passes(recipe) if passes is None else passes
    completion = recipe.completion_len.max
    width = (prompt, completion)
    rows_at = [width] * rows
    runs = [ran(as_evaluation(passes[phase]), rows_at, width)
            for phase in ("rollout.prefill", "rollout.decode", *(p for p in SCORING if p in passes))]
    runs.append(ran(loss_forward(passes), rows_at, width))
    if "reward" in passes:
        extra = reward_extra if reward_extra is not None else reward_extra_tokens(
            recipe.reward.kind, recipe.reward_overhead_tokens, recipe.prm_steps)
        read = max(reward_prompt or prompt, prompt) + completion + extra
        runs.append(ran(as_evaluation(passes["reward"]), [(read, 0)] * rows, (read, 0)))
    return int(charge(*runs, unit="eval").executed_total)


def designed_evaluation_flops(recipe: Recipe, generations: int) -> int:
    """What ``race design --eval-loop trl`` prices one evaluation of a script pilot at: :func:`evaluation_bound`
    over the recipe's ``eval_prompts`` x ``generations`` rows at its longest evaluation prompt (``--eval-prompt-len``,
    by default ``--prompt-len``). The pilot's meter reserves the same bound at the prompts it reads."""
    return evaluation_bound(recipe, recipe.eval_prompts * generations, int(recipe.evaluation_prompt_len.max))


__all__ = ["EVAL_PHASE_OF", "SCORING", "as_evaluation", "designed_evaluation_flops", "evaluation_bound",
           "loss_forward", "round_passes"]
