"""config.json dictionaries of real public models of other families, as their Hugging Face configs state them.

Qwen3-0.6B (explicit head_dim 128 with 16 heads: heads*head_dim = 2048 != hidden 1024; q/k norms),
Llama-3.2-1B (GQA 32/8, head_dim 64, tied), Mistral-7B-v0.3 (GQA 32/8, no sliding window), and
Mistral-7B-v0.1 (uniform 4096-token sliding window).
"""

QWEN3_0_6B = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
    "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 151936, "tie_word_embeddings": True, "attention_bias": False, "hidden_act": "silu",
    "max_position_embeddings": 40960, "rope_theta": 1000000, "rms_norm_eps": 1e-06, "use_sliding_window": False,
    "sliding_window": None, "max_window_layers": 28,
}
LLAMA_3_2_1B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
    "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
    "vocab_size": 128256, "tie_word_embeddings": True, "attention_bias": False, "mlp_bias": False,
    "hidden_act": "silu", "max_position_embeddings": 131072, "rope_theta": 500000.0, "rms_norm_eps": 1e-05,
}
MISTRAL_7B_V03 = {
    "architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 32768, "tie_word_embeddings": False, "hidden_act": "silu", "max_position_embeddings": 32768,
    "rope_theta": 1000000.0, "rms_norm_eps": 1e-05, "sliding_window": None,
}
MISTRAL_7B_V01 = dict(MISTRAL_7B_V03, vocab_size=32000, sliding_window=4096, rope_theta=10000.0)

# Published parameter totals of these models (model cards / safetensors index).
PUBLISHED_PARAMS = {"qwen3-0.6b": 596_049_920, "llama-3.2-1b": 1_235_814_400, "mistral-7b-v0.3": 7_248_023_552,
                    "mistral-7b-v0.1": 7_241_732_096}
