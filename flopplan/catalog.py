"""Registry entries of other families, written as the ``config.json`` excerpts they come from (data only).

Each entry gives the FLOP- and parameter-deciding keys of the config.json of the named repository on the Hugging
Face Hub (``Qwen/Qwen3-8B`` etc.); :mod:`flopplan.arch` turns them into specs with the same parser it uses for
files, so a registry entry and the downloaded config give one spec. The parameter counts they imply match the
model cards (Qwen3-30B-A3B: 30.5B total, 3.3B active; Qwen3-235B-A22B: 235B / 22B; Qwen1.5-MoE-A2.7B: 14.3B / 2.7B;
Mixtral-8x7B: 46.7B / 12.9B; Llama-3.1-8B: 8.03B) and the published totals of the others (Gemma 2 2B/9B/27B:
2,614,341,888 / 9,241,705,984 / 27,227,128,320; Gemma 3 1B: 999,885,952; Gemma 3 4B/12B/27B: the language model's
3,209M / 10,759M / 25,600M non-embedding parameters of the Gemma 3 report's Table 1, arXiv:2503.19786; Phi-3-mini:
3,821,079,552; Phi-3-medium: 13,960,238,080): tests/test_catalog.py checks them.

Gemma 3 4B, 12B and 27B are multimodal (``Gemma3ForConditionalGeneration``): their entries are the ``text_config``
of the config.json with transformers' Gemma3TextConfig defaults filled in, the language model alone; the vision
tower and projector are not counted.
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


def _gemma(version: int, hidden: int, inter: int, layers: int, heads: int, kv_heads: int, head_dim: int,
           window: int, scalar: int, **extra: Any) -> dict[str, Any]:
    if version == 2:
        cfg = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "vocab_size": 256000,
               "max_position_embeddings": 8192, "rope_theta": 10000.0, "attn_logit_softcapping": 50.0,
               "final_logit_softcapping": 30.0}
    else:
        cfg = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "vocab_size": 262208,
               "max_position_embeddings": 131072, "rope_theta": 1000000.0, "sliding_window_pattern": 6}
    return {**cfg, "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
            "sliding_window": window, "query_pre_attn_scalar": scalar, "tie_word_embeddings": True,
            "attention_bias": False, "hidden_activation": "gelu_pytorch_tanh", **extra}


def _phi3(hidden: int, inter: int, layers: int, heads: int, kv_heads: int) -> dict[str, Any]:
    return {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": hidden,
            "intermediate_size": inter, "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": kv_heads, "vocab_size": 32064, "tie_word_embeddings": False,
            "max_position_embeddings": 4096, "rope_theta": 10000.0, "sliding_window": 2047, "hidden_act": "silu"}


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
    "google/gemma-2-2b": _gemma(2, 2304, 9216, 26, 8, 4, 256, 4096, 256),
    "google/gemma-2-9b": _gemma(2, 3584, 14336, 42, 16, 8, 256, 4096, 256),
    "google/gemma-2-27b": _gemma(2, 4608, 36864, 46, 32, 16, 128, 4096, 144),
    "google/gemma-3-1b-it": _gemma(3, 1152, 6912, 26, 4, 1, 256, 512, 256, vocab_size=262144,
                                   max_position_embeddings=32768),
    "google/gemma-3-4b-it": _gemma(3, 2560, 10240, 34, 8, 4, 256, 1024, 256),  # text_config
    "google/gemma-3-12b-it": _gemma(3, 3840, 15360, 48, 16, 8, 256, 1024, 256),  # text_config
    "google/gemma-3-27b-it": _gemma(3, 5376, 21504, 62, 32, 16, 128, 1024, 168),  # text_config
    "microsoft/Phi-3-mini-4k-instruct": _phi3(3072, 8192, 32, 32, 32),
    "microsoft/Phi-3-medium-4k-instruct": _phi3(5120, 17920, 40, 40, 10),
}
"""Sources: the config.json of each repository id on the Hugging Face Hub (read from the public files; the Qwen3
dense and MoE shapes agree with transformers' Qwen3Config / Qwen3MoeConfig defaults where those describe them)."""

MOE_MODELS: tuple[str, ...] = ("qwen3-30b-a3b", "qwen3-235b-a22b", "qwen1.5-moe-a2.7b", "qwen2-57b-a14b",
                               "mixtral-8x7b-v0.1")
"""Registry names of the mixture-of-experts policies."""


def registry_name(repo_id: str) -> str:
    """The registry name of a Hub id: the repository name in lower case (``Qwen/Qwen3-8B`` -> ``qwen3-8b``), without
    Gemma's ``-it`` (``google/gemma-3-4b-it`` -> ``gemma-3-4b``: the pre-trained model has the same shapes)."""
    return repo_id.rsplit("/", 1)[-1].lower().removesuffix("-it")
