"""Which generation settings of a TRL run the meter prices: TRL merges ``generation_kwargs`` over its own generation
config, and transformers fills what TRL leaves unset from the policy's ``generation_config``; a setting that changes
what a rollout computes (beams, several sequences a row, no or a static KV cache, another stop, a longer limit, a
draft model) would run more than the meter charges, so it is refused with one line (:func:`check_generation` for a
GRPOConfig, :func:`check_model_generation` for the policy's own). The meter charges what the ids returned show; these
are the settings under which that is what ran (TRL 1.16, transformers 5.x)."""

from __future__ import annotations

import json
from typing import Any

from flopplan.errors import UserError

SAMPLING_KWARGS = frozenset({
    "temperature", "top_p", "top_k", "min_p", "typical_p", "epsilon_cutoff", "eta_cutoff", "repetition_penalty",
    "do_sample", "min_new_tokens", "min_length", "no_repeat_ngram_size", "bad_words_ids", "suppress_tokens",
    "begin_suppress_tokens", "sequence_bias", "renormalize_logits", "remove_invalid_values", "pad_token_id",
    "bos_token_id", "forced_eos_token_id", "forced_bos_token_id", "cache_implementation", "use_cache",
})
"""HF ``generate``: the ``generation_kwargs`` keys that choose among the next token's logits, force a length the meter
reads from the ids returned, or name the KV cache (checked apart: :data:`CACHES`), so the same forward passes run.
Any other key can change what ``generate`` computes (beams, several sequences per row, where it stops, how long it
may run, a draft model, classifier-free guidance): refused, as TRL merges ``generation_kwargs`` over its own
generation config (TRL 1.16, ``GRPOTrainer.__init__``)."""
VLLM_SAMPLING_KWARGS = frozenset({
    "temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty", "frequency_penalty", "repetition_penalty",
    "min_tokens", "logit_bias", "allowed_token_ids", "bad_words", "stop", "stop_token_ids", "ignore_eos",
    "include_stop_str_in_output", "skip_special_tokens", "spaces_between_special_tokens",
})
"""vLLM (``use_vllm``): the ``generation_kwargs`` keys of its ``SamplingParams`` that act on the logits or on where a
sequence stops; the meter charges vLLM's rollouts from the ids it returned. Others (``n``, ``max_tokens``,
``prompt_logprobs``, ...) are refused."""
CACHES = (None, "dynamic", "offloaded")
"""KV caches whose decode steps attend over the tokens so far (offloaded: the same passes, the cache kept on the CPU);
a static or sliding-window cache attends over its whole preallocated length."""
CACHE_PRICED = ("flopplan prices generation with a KV cache whose decode steps attend over the tokens so far "
                "(None, dynamic or offloaded)")
"""What a refusal of another cache says, wherever the cache is set."""


def check_generation(config: dict[str, Any]) -> None:
    """Refuse generation settings that change what a rollout computes (a review found beams, ``use_cache=False`` and
    another ``eos_token_id`` charged below what ran, and ``max_new_tokens`` past the guard's bound, which is
    ``max_completion_length``): with HF ``generate`` a KV cache outside :data:`CACHES` and ``generation_kwargs``
    keys outside :data:`SAMPLING_KWARGS`; with vLLM keys outside :data:`VLLM_SAMPLING_KWARGS` (TRL passes them to
    its ``SamplingParams``; ``cache_implementation`` is not used there)."""
    vllm = config.get("use_vllm") is True
    if not vllm:
        check_generate_settings({"cache_implementation": config.get("cache_implementation")}, "GRPOConfig")
    extra = config.get("generation_kwargs")
    if extra is None:
        return
    if isinstance(extra, str):  # a JSON string, as TRL's command line takes it
        try:
            extra = json.loads(extra)
        except ValueError:
            raise UserError(f"GRPOConfig generation_kwargs {extra!r} is not a JSON object") from None
    if not isinstance(extra, dict):
        raise UserError(f"GRPOConfig generation_kwargs must be an object, not {type(extra).__name__}")
    if not vllm:
        check_generate_settings(extra, "GRPOConfig generation_kwargs")
        return
    for key in sorted(extra):
        if key not in VLLM_SAMPLING_KWARGS:
            raise UserError(f"GRPOConfig generation_kwargs {key!r}: flopplan does not price it with vLLM (it can "
                            "change what vLLM generates: sequences, length, scored prompts)")


def check_generate_settings(settings: dict[str, Any], where: str) -> None:
    """Refuse HF ``generate`` settings (``where``: whose) that change what a rollout computes: a KV cache outside
    :data:`CACHES`, ``use_cache`` off, and keys outside :data:`SAMPLING_KWARGS` (:func:`check_generation`)."""
    cache = settings.get("cache_implementation")
    if cache not in CACHES:
        raise UserError(f"{where} cache_implementation {cache!r}: {CACHE_PRICED}")
    if settings.get("use_cache", True) is not True:
        raise UserError(f"{where} use_cache: flopplan prices KV-cached generation; without the cache every step "
                        "recomputes the whole prefix")
    for key in sorted(settings):
        if key in SAMPLING_KWARGS:
            continue
        hint = {"max_new_tokens": "set max_completion_length instead", "max_length": "set max_completion_length "
                "instead", "eos_token_id": "TRL stops and cuts completions at its own EOS ids, the tokenizer's and "
                "the model's generation config's: leave it out", "num_beams": "TRL samples one sequence per row"
                }.get(key, "it can change what generate computes")
        raise UserError(f"{where} {key!r}: flopplan does not price it ({hint})")


TRL_GENERATION = frozenset({"max_new_tokens", "do_sample", "pad_token_id", "bos_token_id", "eos_token_id",
                            "temperature", "top_p", "top_k", "min_p", "repetition_penalty"})
"""The generation settings TRL 1.16 sets itself for HF ``generate`` (``GRPOTrainer.__init__``; ``cache_implementation``
too, from its config): transformers fills every other unset one from the model's ``generation_config``."""
MODEL_GENERATION_OFF = {
    "num_beams": (None, 1), "num_beam_groups": (None, 1), "num_return_sequences": (None, 1), "use_cache": (None, True),
    "guidance_scale": (None, 1, 1.0), "prompt_lookup_num_tokens": (None,), "assistant_early_exit": (None,),
    "penalty_alpha": (None, 0, 0.0), "dola_layers": (None,), "prefill_chunk_size": (None,), "use_mtp": (None, False)}
"""Settings of a model's ``generation_config`` that change what ``generate`` computes, with the values that do not:
beams, several sequences a row, no KV cache, classifier-free guidance, prompt-lookup or early-exit drafting,
contrastive search, DoLa, a prefill in chunks (transformers 5.25 ``generation/utils.py:4339``: each chunk a forward
over the cache so far; a held-out user's chunks of 1 ran 8,200,192 FLOPs the meter did not charge), drafting with
the model's multi-token-prediction heads (``use_mtp``, ``utils.py:1336``). The rest of transformers 5.25's
``GenerationConfig`` keys leave the passes as charged: they act on the logits or on where a row stops (charged from
the ids returned), apply to beam search or to a draft model only (refused above), name outputs or compilation, or
make ``generate`` fail under TRL (``stop_strings`` and ``token_healing`` need a tokenizer TRL does not pass)."""


def check_model_generation(settings: dict[str, Any], overridden: set[str], cache: Any,
                           where: str = "the policy's generation_config") -> None:
    """Refuse a policy whose ``generation_config`` (``settings``: its ``to_diff_dict()``) makes TRL's HF ``generate``
    compute more than the meter charges: transformers fills each setting TRL leaves unset (:data:`TRL_GENERATION`,
    ``overridden``: the script's ``generation_kwargs``) from it, so a model saved with ``num_beams`` 3 ran 3 beams a
    row (a review); ``cache``: GRPOConfig's ``cache_implementation``, which replaces the model's when set."""
    for key, allowed in MODEL_GENERATION_OFF.items():
        if key in settings and key not in overridden and key not in TRL_GENERATION and settings[key] not in allowed:
            raise UserError(f"{where} sets {key} {settings[key]!r}, which TRL's generate runs and flopplan does not "
                            f"price: set it back to {allowed[-1]!r} (model.generation_config before building the "
                            "trainer; trainer.generation_config after)")  # (generation_kwargs refuses the key)
    model_cache = settings.get("cache_implementation")
    if cache is None and "cache_implementation" not in overridden and model_cache not in CACHES:
        raise UserError(f"the policy's generation_config sets cache_implementation {model_cache!r}, which TRL's "
                        f"generate inherits: {CACHE_PRICED}; set GRPOConfig cache_implementation 'dynamic'")
