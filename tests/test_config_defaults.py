"""A config.json that leaves out a key its family defaults is read as transformers reads it: the count of a config
with only the required sizes equals FlopCounterMode on the model transformers builds from that same config (meta
device, eager attention), for every model type flopplan reads (a held-out user's configs without
``num_key_value_heads``, ``head_dim`` or ``sliding_window`` were counted 8-46 % off)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from flopplan.arch import spec_from_config  # noqa: E402
from flopplan.config_defaults import FAMILY_DEFAULTS  # noqa: E402
from flopplan.errors import UserError  # noqa: E402
from flopplan.formulas import decode_flops, forward_flops  # noqa: E402
from flopplan.measure import counters  # noqa: E402

MOE_SIZES = {  # what an MoE config must state (flopplan refuses one without it)
    "mixtral": {"num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen2_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                  "shared_expert_intermediate_size": 48},
    "qwen3_moe": {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
}
BARE = {"hidden_size": 256, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 64,
        "vocab_size": 1000}
"""The required sizes only: 64 query heads (twice the largest default key/value heads), hidden/heads 4
(unlike any family's default head_dim)."""
LONG = 4100  # a decode context past the 4096-token default windows


def _bare(model_type: str) -> dict:
    return {"model_type": model_type, **BARE, **MOE_SIZES.get(model_type, {})}


def _built(cfg: dict):
    """The model transformers builds from ``cfg`` as it stands, on the meta device."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(**{**cfg, "pad_token_id": 0})
    config._attn_implementation = "eager"
    if cfg["model_type"] in MOE_SIZES:
        config._experts_implementation = "batched_mm"  # (the eager loop reads routing values, which meta lacks)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)


@pytest.mark.parametrize("model_type", sorted({*FAMILY_DEFAULTS, "llama", "phi3"}))
def test_a_config_without_its_familys_defaults_counts_what_transformers_builds(model_type, record_exact):
    cfg = _bare(model_type)
    spec = spec_from_config(cfg, f"bare-{model_type}")
    model = _built(cfg)
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    assert (spec.num_kv_heads, spec.head_dim) == (config.num_key_value_heads, head_dim)
    assert spec.tie_embeddings == bool(config.tie_word_embeddings)
    record_exact(f"bare {model_type} meta forward B=1 T=16", forward_flops(spec, 1, 16, 16).total,
                 counters.forward(model, 1, 16, None))
    record_exact(f"bare {model_type} meta decode B=1 context {LONG}", decode_flops(spec, 1, LONG).total,
                 counters.decode(model, 1, LONG))


def test_a_key_the_config_states_wins_over_its_familys_default():
    """A stated value, null included, is the config's: null key/value heads are the query heads (transformers'
    reading of None), a stated window of null is no window."""
    stated = spec_from_config({**_bare("mistral"), "num_key_value_heads": 4, "sliding_window": None}, "stated")
    assert (stated.num_kv_heads, stated.sliding_window) == (4, None)
    null = spec_from_config({**_bare("qwen2"), "num_key_value_heads": None}, "null")
    assert null.num_kv_heads == BARE["num_attention_heads"]


def test_a_window_larger_than_the_context_is_counted_as_it_runs_not_refused():
    """A Mistral config of 512 positions keeps its family's 4096-token window (a held-out user's config was refused:
    "sliding_window 4096 is larger than the context ... set it to null", which the config did not state): within
    the window every key is attended, so it counts as full attention there, and past it as the window."""
    cfg = {**_bare("mistral"), "max_position_embeddings": 512}
    spec = spec_from_config(cfg, "short")
    dense = spec_from_config({**cfg, "sliding_window": None}, "dense")
    assert spec.sliding_window == 4096
    assert decode_flops(spec, 1, 500).total == decode_flops(dense, 1, 500).total
    assert decode_flops(spec, 1, LONG).total < decode_flops(dense, 1, LONG).total


@pytest.mark.parametrize("model_type", ["qwen2", "qwen3", "qwen2_moe", "qwen3_moe"])
def test_a_qwen_config_that_turns_its_window_on_slides_as_transformers_builds_it(model_type, record_exact):
    """``use_sliding_window`` without ``sliding_window`` slides over the family's 4096 tokens (it was counted as full
    attention: +16.7 % at context 5000, a held-out user); Qwen2-MoE slides its even layers below
    ``max_window_layers``, Qwen3-MoE every layer (its attention reads no layer types), Qwen2/Qwen3 the layers from
    ``max_window_layers`` on."""
    cfg = {**_bare(model_type), "num_hidden_layers": 3, "use_sliding_window": True, "max_window_layers": 1}
    spec = spec_from_config(cfg, f"windowed-{model_type}")
    assert spec.sliding_window == 4096
    record_exact(f"windowed {model_type} meta decode B=1 context {LONG}", decode_flops(spec, 1, LONG).total,
                 counters.decode(_built(cfg), 1, LONG))


@pytest.mark.parametrize("model_type", sorted(MOE_SIZES))
def test_the_moe_defaults_are_the_installed_config_classes(model_type):
    """The table's MoE sizes are what the installed transformers' config class sets (Qwen3-MoE's expert count read
    through its attribute_map: ``num_experts`` is stored as ``num_local_experts``; the window and the heads are
    checked on the model built by the tests above)."""
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type)
    keys = {*MOE_SIZES[model_type], "num_experts", "num_local_experts", "intermediate_size", "moe_intermediate_size",
            "shared_expert_intermediate_size"} & set(FAMILY_DEFAULTS[model_type])
    assert keys >= set(MOE_SIZES[model_type]) - {"num_local_experts", "num_experts"}
    for key in keys:
        assert getattr(config, key) == FAMILY_DEFAULTS[model_type][key], key


@pytest.mark.parametrize("model_type", sorted(MOE_SIZES))
@pytest.mark.parametrize("left_out", ["all", "intermediate_size", "num_experts_per_tok"])
def test_an_moe_config_without_its_moe_keys_counts_what_transformers_builds(model_type, left_out, record_exact):
    """A config that leaves out the expert count, the top-k, the expert width or the shared expert's width (or the
    Qwen MoE families' unused dense width) is built with its class's defaults; it was refused ("a
    mixture-of-experts config needs num_experts_per_tok", a held-out user's configs)."""
    moe = {} if left_out == "all" else {k: v if "experts" not in k or left_out != "num_experts_per_tok" else 16
                                        for k, v in MOE_SIZES[model_type].items() if k != left_out}  # (top-8 of 16)
    cfg = {"model_type": model_type, **{k: v for k, v in BARE.items() if k != "intermediate_size"
                                        or model_type == "mixtral" or left_out != "intermediate_size"}, **moe}
    spec = spec_from_config(cfg, f"moe-{model_type}")
    config = _built(cfg).config
    experts = config.num_local_experts if model_type != "qwen2_moe" else config.num_experts
    width = config.intermediate_size if model_type == "mixtral" else config.moe_intermediate_size
    assert (spec.moe.experts, spec.moe.top_k, spec.moe.expert_intermediate) == (
        experts, config.num_experts_per_tok, width)
    assert spec.moe.shared_intermediate == getattr(config, "shared_expert_intermediate_size", 0)
    record_exact(f"moe defaults {model_type} without {left_out} meta forward B=1 T=8",
                 forward_flops(spec, 1, 8, 8).total, counters.forward(_built(cfg), 1, 8, None))


@pytest.mark.parametrize("model_type", sorted(MOE_SIZES))
@pytest.mark.parametrize("stated", [{"num_experts": 6}, {"num_local_experts": 6}, {"num_experts": 6,
                                                                                    "num_local_experts": 4}])
def test_the_expert_count_is_read_under_the_name_transformers_reads(model_type, stated):
    """Qwen3-MoE: ``num_local_experts`` wins over ``num_experts``; Mixtral: ``num_experts`` wins; Qwen2-MoE reads
    ``num_experts`` alone (a ``num_local_experts`` was read where it had none; transformers ignores it)."""
    cfg = {**_bare(model_type), "num_experts_per_tok": 2}
    cfg = {**{k: v for k, v in cfg.items() if k not in ("num_experts", "num_local_experts")}, **stated}
    config = _built(cfg).config
    built = config.num_experts if model_type == "qwen2_moe" else config.num_local_experts
    assert spec_from_config(cfg, "count").moe.experts == built


@pytest.mark.parametrize("model_type", ["qwen2_moe", "qwen3_moe"])
@pytest.mark.parametrize("layers,only,step", [(2, [7], 1), (2, [2], 1), (2, [1], 1), (2, [], 2), (3, [], -1),
                                              (1, [], 1), (2, None, 1)])
def test_a_dense_layer_is_refused_only_where_transformers_builds_one(model_type, layers, only, step):
    """transformers' decoder layer is sparse iff ``i not in mlp_only_layers and (i + 1) % decoder_sparse_step ==
    0``: an index past the last layer (``[7]`` on 2 layers) builds none, and was refused."""
    cfg = {**_bare(model_type), "num_hidden_layers": layers, "mlp_only_layers": only, "decoder_sparse_step": step}
    dense = [i for i, layer in enumerate(_built(cfg).model.layers) if "Sparse" not in type(layer.mlp).__name__]
    if dense:
        with pytest.raises(UserError, match="dense"):
            spec_from_config(cfg, "dense")
    else:
        assert spec_from_config(cfg, "sparse").moe is not None


def test_a_window_of_1_is_refused_only_where_a_layer_slides():
    """transformers' sliding cache keeps its last window - 1 tokens, at 1 every token; where no layer slides the
    window is never read (a review: it was refused there too)."""
    cfg = {**_bare("gemma2"), "num_hidden_layers": 2, "sliding_window": 1}
    with pytest.raises(UserError, match="sliding_window 1 is not counted"):
        spec_from_config(cfg, "w1")
    assert spec_from_config({**cfg, "layer_types": ["full_attention"] * 2}, "w1").sliding_window is None


@pytest.mark.parametrize("keys", [{"sliding_window": 8}, {"sliding_window": None, "layer_types": ["sliding_attention",
                                                                                                 "full_attention"]}])
def test_a_llama_config_with_a_window_is_refused_not_counted_as_full_attention(keys):
    """A held-out user's Llama config.json carrying sliding_window (LlamaConfig keeps the key): transformers 5.25's
    decode cache slides on it while the prefill mask does not, and flopplan counted full attention, 3.5 % over a
    GRPO rollout at 8B and 8,192 tokens. Refused in one line; the decode here shows the window acting."""
    with pytest.raises(UserError, match=r"a llama config with .* is not counted"):
        spec_from_config({**_bare("llama"), **keys}, "windowed")
    if keys.get("sliding_window"):
        full = spec_from_config(_bare("llama"), "full")
        model = _built({**_bare("llama"), **keys})
        assert counters.decode(model, 1, 64) < decode_flops(full, 1, 64).total  # (what the refusal is for)
