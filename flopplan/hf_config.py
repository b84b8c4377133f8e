"""An :class:`ArchSpec` written back as a Hugging Face ``config.json`` dictionary (torch-free).

The inverse of :func:`flopplan.arch.spec_from_config`: used to build real transformers models from a spec and to
write config files for tests and users.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flopplan.arch import ArchSpec
from flopplan.errors import UserError
from flopplan.moe import MOE_MODEL_TYPES, moe_config

_ARCHITECTURES = {"qwen2": "Qwen2", "qwen3": "Qwen3", "llama": "Llama", "mistral": "Mistral",
                  "qwen3_moe": "Qwen3Moe", "qwen2_moe": "Qwen2Moe", "mixtral": "Mixtral", "gemma2": "Gemma2",
                  "gemma3_text": "Gemma3", "phi3": "Phi3"}


def to_hf_config(spec: ArchSpec) -> dict[str, Any]:
    """The config.json of the spec's architecture (sizes, biases, head, window, MoE block)."""
    prefix = _ARCHITECTURES[spec.family]
    base = MOE_MODEL_TYPES.get(spec.family, spec.family)  # an MoE family's attention is its dense family's
    if spec.head.kind == "lm":
        architecture = f"{prefix}ForCausalLM"
    elif len(spec.head.layers) == 1 and not spec.head.layers[0].bias:
        architecture = f"{prefix}ForSequenceClassification"
    elif spec.head.layers[-1].out_features == 1:  # Qwen2.5-Math-RM's two-layer head (flopplan.heads.orm_mlp_head)
        architecture = f"{prefix}ForRewardModel"
    else:
        architecture = f"{prefix}ForProcessRewardModel"
    cfg: dict[str, Any] = {
        "architectures": [architecture],
        "model_type": spec.family,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads,
        "vocab_size": spec.vocab_size,
        "tie_word_embeddings": spec.tie_embeddings,
        "hidden_act": "gelu_pytorch_tanh" if spec.family.startswith("gemma") else "silu",
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": spec.max_position_embeddings or 32768,
        "rope_theta": spec.rope_theta or 1e6,
    }
    if base != "qwen2" or spec.head_dim * spec.num_heads != spec.hidden_size:
        cfg["head_dim"] = spec.head_dim
    if base in ("qwen3", "llama", "gemma2", "gemma3_text"):
        cfg["attention_bias"] = spec.qkv_bias
    if base == "llama":
        cfg["mlp_bias"] = spec.mlp_bias
    if base in ("qwen2", "qwen3"):
        cfg["use_sliding_window"] = spec.sliding_window is not None
        cfg["sliding_window"] = spec.sliding_window
        cfg["max_window_layers"] = 0  # layer i slides iff i >= max_window_layers; layer_types below say otherwise
    if base in ("mistral", "phi3", "gemma2", "gemma3_text"):
        cfg["sliding_window"] = spec.sliding_window
    if base.startswith("gemma"):
        cfg["hidden_activation"] = "gelu_pytorch_tanh"
        cfg["query_pre_attn_scalar"] = spec.head_dim
    if spec.sliding_window is not None or base.startswith("gemma"):
        # every layer's type, as transformers would otherwise derive it from its own defaults
        windows = spec.layer_types or (("sliding_attention" if spec.sliding_window else "full_attention"),) \
            * spec.num_layers
        cfg["layer_types"] = list(windows)
    if base == "qwen2" and spec.moe is not None:
        cfg["qkv_bias"] = spec.qkv_bias
    if spec.moe is not None:
        cfg.update(moe_config(spec.moe, spec.family))
    if spec.head.kind == "score":
        cfg["num_labels"] = spec.head.layers[-1].out_features
    return cfg


def architecture_name(folder: Path) -> str:
    """The class its ``config.json`` names first in ``architectures`` ("" when it names none)."""
    from flopplan.fileio import read_json

    data = read_json(folder / "config.json", "config")
    if not isinstance(data, dict):
        raise UserError(f"config {str(folder / 'config.json')!r} is not a JSON object")
    names = data.get("architectures")
    return names[0] if isinstance(names, list) and names and isinstance(names[0], str) else ""


LOCAL_ORMS_ONLY = ("flopplan runs local outcome reward models only (sequence classification, one score per "
                   "completion: `flopplan reward-model train` makes one); for process rewards give --reward prm:NAME "
                   "without --reward-model-path (a registry PRM architecture, random-initialised)")
"""What a local reward model folder flopplan cannot run is told to do instead."""


def require_local_orm(folder: Path, what: str) -> str:
    """The class a local reward model folder's config names, which must be a sequence classifier: read before the
    config is counted (a head flopplan does not count is named as what the folder holds); ``what``: how the
    refusal names the folder."""
    architecture = architecture_name(folder)
    if not architecture.endswith("ForSequenceClassification"):
        raise UserError(f"{what} holds {not_an_orm(architecture)}: {LOCAL_ORMS_ONLY}")
    return architecture


def not_an_orm(architecture: str) -> str:
    """What a reward model folder without a sequence-classification head holds, by its config's class name."""
    if architecture.endswith("ForProcessRewardModel"):
        return (f"a process reward model ({architecture}: a local PRM needs its own modeling code, custom code "
                "flopplan does not run)")
    if architecture.endswith("ForRewardModel"):
        return (f"{architecture} (a reward model of its own class: remote modeling code flopplan does not run), "
                "not a sequence classifier")
    if architecture.endswith("ForTokenClassification"):
        return f"a token-classification model ({architecture}: a score per token), not an outcome reward model"
    if architecture.endswith("ForCausalLM"):
        return f"a language model ({architecture}: no score head), not an outcome reward model"
    return f"{architecture or 'a model with no architectures in its config'}, not an outcome reward model"
