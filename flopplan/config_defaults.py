"""What transformers reads for a key a ``config.json`` leaves out, by model type, and the sliding windows it builds
from a config (torch-free).

A config.json need not state a key whose value is its config class's default, and transformers then builds the
model with that default, which is the family's, not one rule for all: a Qwen2 config without
``num_key_value_heads`` runs 32 key/value heads (``Qwen2Config``'s default), a Mistral one 8, a Llama one as many as
its query heads; a Qwen3 one without ``head_dim`` runs 128-wide heads, a Gemma 2 one 256-wide, whatever
hidden/heads is; a Mistral or Gemma 2 one without ``sliding_window`` slides over 4096 tokens. Read with one
fallback for every family (the heads, hidden/heads, no window), such configs were counted wrong by 8-46 % (a
held-out user's configs, FlopCounterMode on the model transformers builds from them).

:data:`FAMILY_DEFAULTS` holds, for each model type flopplan reads, the defaults of the keys whose absence
flopplan's own fallback would read otherwise, as transformers 5.x's config classes set them (``Qwen2Config`` and
the rest, read from transformers 5.25; ``tests/test_config_defaults.py`` checks each against the installed
transformers, on the model it builds). A key given as null keeps flopplan's fallback, as transformers does for
``num_key_value_heads``. Gemma 3's table is its text config's whole default set: the ``text_config`` of a
multimodal Gemma 3 config.json states only the keys that differ from it.
"""

from __future__ import annotations

from typing import Any

from flopplan.attention import FULL, SLIDING
from flopplan.budget import BUDGET_LIMITS, budget_cap
from flopplan.errors import UserError

GEMMA3_TEXT_DEFAULTS = {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
                        "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                        "max_position_embeddings": 131072, "sliding_window": 4096, "sliding_window_pattern": 6,
                        "tie_word_embeddings": True}
"""transformers' ``Gemma3TextConfig`` defaults (5.x)."""

FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "qwen2": {"num_key_value_heads": 32, "sliding_window": 4096, "max_window_layers": 28,
              "max_position_embeddings": 32768},
    "qwen3": {"num_key_value_heads": 32, "head_dim": 128, "sliding_window": 4096, "max_window_layers": 28,
              "max_position_embeddings": 32768},
    "llama": {"max_position_embeddings": 2048},  # key/value heads: the query heads; head_dim: hidden/heads
    "mistral": {"num_key_value_heads": 8, "sliding_window": 4096, "max_position_embeddings": 131072},
    "mixtral": {"num_key_value_heads": 8, "max_position_embeddings": 131072,  # no window by default
                "num_local_experts": 8, "num_experts_per_tok": 2},
    "gemma2": {"num_key_value_heads": 4, "head_dim": 256, "sliding_window": 4096, "tie_word_embeddings": True,
               "max_position_embeddings": 8192},
    "gemma3_text": GEMMA3_TEXT_DEFAULTS,
    "phi3": {"max_position_embeddings": 4096},  # key/value heads: the query heads; no window by default
    "qwen2_moe": {"num_key_value_heads": 16, "sliding_window": 4096, "max_window_layers": 28,
                  "max_position_embeddings": 32768, "intermediate_size": 5632, "num_experts": 60,
                  "num_experts_per_tok": 4, "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632},
    "qwen3_moe": {"num_key_value_heads": 4, "sliding_window": 4096,  # head_dim: hidden/heads
                  "max_position_embeddings": 32768, "intermediate_size": 6144, "num_experts": 128,
                  "num_experts_per_tok": 8, "moe_intermediate_size": 768},
}
"""Per model type, the defaults transformers gives the keys a config.json leaves out (those flopplan reads). The Qwen
families' window applies only under ``use_sliding_window`` (false by default). The MoE families' expert counts sit
under the key that loses where a config states both (:data:`flopplan.moe.EXPERT_COUNT_KEYS`), so a count stated
under either name wins over the default; the Qwen MoE families' ``intermediate_size`` is the width of a dense layer,
which flopplan refuses (:func:`flopplan.moe.dense_layers`), so its default changes no count."""


def with_family_defaults(cfg: dict[str, Any], model_type: Any) -> dict[str, Any]:
    """``cfg`` with the keys it leaves out set to its family's defaults (:data:`FAMILY_DEFAULTS`); a key it
    states, null included, is kept; a model type flopplan does not read is returned as it is."""
    defaults = FAMILY_DEFAULTS.get(model_type) if isinstance(model_type, str) else None
    return cfg if defaults is None else {**defaults, **cfg}


def windows(cfg: dict[str, Any], model_type: str, where: str) -> tuple[int | None, tuple[str, ...] | None]:
    """The sliding window and, when layers differ, each layer's type, as transformers 5.x builds them (``cfg`` with
    :func:`with_family_defaults`, ``model_type`` its own): an explicit ``layer_types``; else, where
    ``use_sliding_window`` is set, Qwen2/Qwen3: layer i slides iff i >= ``max_window_layers``, Qwen2-MoE: iff i is
    even and i < ``max_window_layers``, Qwen3-MoE: every layer (its attention reads no layer types); Gemma 2: every
    other layer from the first; Gemma 3: all but every ``sliding_window_pattern``-th; Mistral, Mixtral, Phi-3:
    every layer when ``sliding_window`` is set; Llama: none, and a Llama config with a window (its decode cache
    slides, its prefill mask does not) is refused. (None, None): full attention."""
    layers: int = cfg["num_hidden_layers"]  # checked a positive integer by the caller
    window = cfg.get("sliding_window")
    if model_type == "llama" and (window is not None or SLIDING in (cfg.get("layer_types") or ())):
        keys = "sliding_window" if window is not None else "sliding layer_types"
        raise UserError(f"{where}: a llama config with {keys} is not counted: transformers 5.25's Llama masks its "
                        "prefill causally over the whole context but builds its decode cache sliding from these keys; "
                        "remove them (a Llama attends to the whole context), or give the config of a family that "
                        "slides throughout (mistral)")
    if model_type == "llama" or window is None:
        return None, None
    qwen = model_type in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe")
    if qwen and not cfg.get("use_sliding_window", False):
        return None, None
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise UserError(f"{where}: sliding_window must be a positive integer or null, not {window!r}")
    types = None if model_type == "qwen3_moe" else cfg.get("layer_types")
    if types is None and model_type in ("qwen2", "qwen3", "qwen2_moe"):
        max_window_layers = cfg.get("max_window_layers")  # (FAMILY_DEFAULTS: 28 where the config has none)
        if isinstance(max_window_layers, bool) or not isinstance(max_window_layers, int) or max_window_layers < 0:
            raise UserError(f"{where}: max_window_layers must be a non-negative integer, not {max_window_layers!r}")
        types = [SLIDING if (i >= max_window_layers if model_type != "qwen2_moe" else
                             i % 2 == 0 and i < max_window_layers) else FULL for i in range(layers)]
    elif types is None and model_type in ("gemma2", "gemma3_text"):
        pattern = 2 if model_type == "gemma2" else cfg.get("sliding_window_pattern")  # (6 where it has none)
        if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern <= 0:
            raise UserError(f"{where}: sliding_window_pattern must be a positive integer, not {pattern!r}")
        types = [SLIDING if (i + 1) % pattern else FULL for i in range(layers)]
    if types is not None and (not isinstance(types, list) or len(types) != layers
                              or not set(types) <= {SLIDING, FULL}):
        raise UserError(f"{where}: layer_types must list {SLIDING} or {FULL} for each of the {layers} layers")
    if types is not None and SLIDING not in types:
        return None, None  # every layer is a full-attention layer
    if window == 1:  # transformers' sliding cache keeps keys[:, :, -window + 1:], at 1 the whole cache
        raise UserError(f"{where}: sliding_window 1 is not counted: transformers' sliding cache keeps its last "
                        "window - 1 tokens, at 1 every token, so a decode step attends to the whole cache or to "
                        "one token as the kernel decides")
    if types is None or FULL not in types:
        return window, None  # every layer slides
    return window, tuple(types)


FLAGS = ("attention_bias", "qkv_bias", "mlp_bias", "tie_word_embeddings", "use_sliding_window")
"""Config keys transformers reads as booleans (read by truthiness, "yes" or 0 would pass for a choice)."""


def check_values(cfg: dict[str, Any], where: str, sizes: dict[str, int]) -> None:
    """What transformers' config classes refuse or no model could be, before the shapes are built (``sizes``: the
    positive integers the caller checked): a flag that is not a boolean (or null), ``layer_types`` without one
    type per layer (``layer_type_validation``), sizes whose one-token forward passes the 1e30 FLOPs flopplan
    plans (at least 2 FLOPs per weight of the MLP's up projection and of the head: no step of it could be run)."""
    flag = next((key for key in FLAGS if cfg.get(key) is not None and not isinstance(cfg[key], bool)), None)
    if flag is not None:
        raise UserError(f"{where}: {flag} must be true or false, not {cfg[flag]!r:.60}")
    types, layers = cfg.get("layer_types"), sizes["num_hidden_layers"]
    if types is not None and (not isinstance(types, list) or len(types) != layers
                              or not all(isinstance(t, str) for t in types)):
        raise UserError(f"{where}: layer_types must list one layer type for each of the {layers} layers, not "
                        f"{types!r:.60}")
    hidden = sizes["hidden_size"]
    if 2 * hidden * (layers * sizes["intermediate_size"] + sizes["vocab_size"]) > BUDGET_LIMITS["flops"]:
        raise UserError(f"{where}: hidden_size, intermediate_size, num_hidden_layers and vocab_size are too large: "
                        f"one token's forward would pass {budget_cap('flops')} FLOPs, the most flopplan plans")

