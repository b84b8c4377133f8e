"""The activation-checkpointing fields of a TRL run as flopplan prices them: transformers 5.25's names for TRL's
(deprecated) ones, and the keywords that leave a recompute as flopplan prices it (every layer, non-reentrant, stopping
once the saved tensors are back)."""

from __future__ import annotations

from typing import Any

from flopplan.errors import UserError

CHECKPOINT_NEUTRAL = frozenset({"use_reentrant", "preserve_rng_state", "determinism_check", "debug", "early_stop",
                                "every_n_layers", "offload"})
"""``activation_checkpointing_kwargs`` priced as they run (transformers 5.25 takes ``every_n_layers`` and
``offload`` out and passes the rest to ``torch.utils.checkpoint.checkpoint``): flopplan prices every layer
checkpointed (``every_n_layers`` 1), non-reentrant, its recompute stopping once the saved tensors are back
(``early_stop=True``, the default: a decoder layer's last projection is not rerun). ``early_stop=False`` reruns it (a
2-layer Qwen2 under FlopCounterMode: 23,068,672 FLOPs a step against 22,020,096), ``every_n_layers`` > 1 recomputes
fewer layers, and a ``context_fn`` (selective checkpointing) or another key changes what is recomputed; offloading the
saved activations, the RNG and the determinism settings change no FLOP."""
CHECKPOINT_ALIASES = (("gradient_checkpointing", "activation_checkpointing"),
                      ("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs"))
"""transformers 5.25's names (new) for TRL's fields (old, deprecated aliases): the new name wins where set, as
``TrainingArguments.__post_init__`` resolves them."""


def resolve_checkpointing(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with the checkpointing fields under their old names, the new ones' values where set."""
    out = dict(config)
    for old, new in CHECKPOINT_ALIASES:
        if out.get(new) is not None:
            out[old] = out[new]
        out.pop(new, None)
    return out


def check_checkpointing(kwargs: Any) -> None:
    """Refuse ``activation_checkpointing_kwargs`` that change what a recompute runs (:data:`CHECKPOINT_NEUTRAL`)."""
    kwargs = kwargs or {}
    if not isinstance(kwargs, dict):
        raise UserError("GRPOConfig activation_checkpointing_kwargs (gradient_checkpointing_kwargs): a dict of "
                        "keywords")
    other = sorted(set(kwargs) - CHECKPOINT_NEUTRAL)
    if kwargs.get("use_reentrant"):
        raise UserError("GRPOConfig activation_checkpointing_kwargs (gradient_checkpointing_kwargs) use_reentrant: "
                        "flopplan prices non-reentrant checkpointing (transformers 5's default)")
    changed = [f"{key} {kwargs[key]!r}" for key, default in (("early_stop", True), ("every_n_layers", 1))
               if key in kwargs and kwargs[key] != default]
    if changed or other:
        raise UserError(f"GRPOConfig activation_checkpointing_kwargs (gradient_checkpointing_kwargs) "
                        f"{', '.join(other or changed)}: flopplan prices the default recompute (every layer, "
                        "non-reentrant, stopping once the saved tensors are back); leave it unset")
