"""Registry entries of other families, written as the ``config.json`` excerpts they come from (data only).

Each entry gives the FLOP- and parameter-deciding keys of the config.json of the named repository on the Hugging
Face Hub (``Qwen/Qwen3-8B`` etc.); :mod:`flopplan.arch` turns them into specs with the same parser it uses for
files, so a registry entry and the downloaded config give one spec. The parameter counts they imply match the
model cards (Qwen3-30B-A3B: 30.5B total, 3.3B active; Qwen3-235B-A22B: 235B / 22B; Qwen1.5-MoE-A2.7B: 14.3B / 2.7B;
Mixtral-8x7B: 46.7B / 12.9B; Llama-3.1-8B: 8.03B).
"""

from __future__ import annotations

from typing import Any


def _qwen3(hidden: int, inter: int, layers: int, heads: int, tied: bool, **extra: Any) -> dict[str, Any]:
    return {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": hidden,
            "intermediate_size": inter, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": tied,
            "attention_bias": False, "max_position_embeddings": 40960, "rope_theta": 1000000,
            "use_sliding_window": False, "sliding_window": None, **extra}


def _qwen3_moe(hidden: int, inter: int, moe_inter: int, layers: int, heads: int) -> dict[str, Any]:
    return dict(_qwen3(hidden, inter, layers, heads, False), architectures=["Qwen3MoeForCausalLM"],
                model_type="qwen3_moe", num_key_value_heads=4, moe_intermediate_size=moe_inter, num_experts=128,
                num_experts_per_tok=8, decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True)


def _qwen2_moe(hidden: int, inter: int, moe_inter: int, shared: int, experts: int, top_k: int, layers: int,
               heads: int, kv_heads: int, max_pos: int) -> dict[str, Any]:
    return {"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe", "hidden_size": hidden,
            "intermediate_size": inter, "moe_intermediate_size": moe_inter,
            "shared_expert_intermediate_size": shared, "num_experts": experts, "num_experts_per_tok": top_k,
            "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
            "vocab_size": 151936, "tie_word_embeddings": False, "decoder_sparse_step": 1, "mlp_only_layers": [],
            "max_position_embeddings": max_pos, "rope_theta": 1000000.0, "use_sliding_window": False}


def _llama(hidden: int, inter: int, layers: int, heads: int, tied: bool) -> dict[str, Any]:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden,
            "intermediate_size": inter, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": 8, "head_dim": hidden // heads, "vocab_size": 128256,
            "tie_word_embeddings": tied, "attention_bias": False, "mlp_bias": False,
            "max_position_embeddings": 131072, "rope_theta": 500000.0}


CONFIGS: dict[str, dict[str, Any]] = {
    # Hub id -> the config.json of that repository on the Hugging Face Hub (FLOP-deciding keys).
    "Qwen/Qwen3-0.6B": _qwen3(1024, 3072, 28, 16, True),
    "Qwen/Qwen3-1.7B": _qwen3(2048, 6144, 28, 16, True),
    "Qwen/Qwen3-4B": _qwen3(2560, 9728, 36, 32, True),
    "Qwen/Qwen3-8B": _qwen3(4096, 12288, 36, 32, False),
    "Qwen/Qwen3-14B": _qwen3(5120, 17408, 40, 40, False),
    "Qwen/Qwen3-32B": _qwen3(5120, 25600, 64, 64, False),
    "Qwen/Qwen3-30B-A3B": _qwen3_moe(2048, 6144, 768, 48, 32),
    "Qwen/Qwen3-235B-A22B": _qwen3_moe(4096, 12288, 1536, 94, 64),
    "Qwen/Qwen1.5-MoE-A2.7B": _qwen2_moe(2048, 5632, 1408, 5632, 60, 4, 24, 16, 16, 8192),
    "Qwen/Qwen2-57B-A14B": _qwen2_moe(3584, 18944, 2560, 20480, 64, 8, 28, 28, 4, 32768),
    "mistralai/Mixtral-8x7B-v0.1": {
        "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
        "intermediate_size": 14336, "num_local_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000, "tie_word_embeddings": False,
        "max_position_embeddings": 32768, "rope_theta": 1000000.0, "sliding_window": None},
    "meta-llama/Llama-3.2-1B": _llama(2048, 8192, 16, 32, True),
    "meta-llama/Llama-3.2-3B": _llama(3072, 8192, 28, 24, True),
    "meta-llama/Llama-3.1-8B": _llama(4096, 14336, 32, 32, False),
    "meta-llama/Llama-3.1-70B": _llama(8192, 28672, 80, 64, False),
    "meta-llama/Llama-3.3-70B-Instruct": _llama(8192, 28672, 80, 64, False),
}
"""Sources: the config.json of each repository id on the Hugging Face Hub (read from the public files; the Qwen3
dense and MoE shapes agree with transformers' Qwen3Config / Qwen3MoeConfig defaults where those describe them)."""

MOE_MODELS: tuple[str, ...] = ("qwen3-30b-a3b", "qwen3-235b-a22b", "qwen1.5-moe-a2.7b", "qwen2-57b-a14b",
                               "mixtral-8x7b-v0.1")
"""Registry names of the mixture-of-experts policies."""


def registry_name(repo_id: str) -> str:
    """The registry name of a Hub id: the repository name in lower case (``Qwen/Qwen3-8B`` -> ``qwen3-8b``)."""
    return repo_id.rsplit("/", 1)[-1].lower()
