"""Architecture specs: the registry's parameter counts and the loading/refusal of config.json files."""

from __future__ import annotations

import dataclasses
import json

import pytest
from configs import LLAMA_3_2_1B, MISTRAL_7B_V01, MISTRAL_7B_V03, PUBLISHED_PARAMS, QWEN3_0_6B
from helpers import write_config

from flopplan.arch import REGISTRY, ArchSpec, load_config, resolve, spec_from_config
from flopplan.errors import UserError

# ../shared/reference/qwen25.md: totals equal the safetensors files; non-embedding = no embedding, no lm_head.
PUBLISHED_QWEN25 = {
    "qwen2.5-0.5b": (494_032_768, 357_898_112),
    "qwen2.5-1.5b": (1_543_714_304, 1_310_340_608),
    "qwen2.5-3b": (3_085_938_688, 2_774_773_760),
    "qwen2.5-7b": (7_615_616_512, 6_525_621_760),
    "qwen2.5-14b": (14_770_033_664, 13_212_898_304),
    "qwen2.5-32b": (32_763_876_352, 31_206_740_992),
    "qwen2.5-72b": (72_706_203_648, 70_214_787_072),
    "qwen2.5-math-1.5b": (1_543_714_304, 1_310_340_608),
    "qwen2.5-math-7b": (7_615_616_512, 6_525_621_760),
}
PRM_HEAD_PARAMS = 12_855_810  # Linear(3584, 3584, bias) + Linear(3584, 2, bias)


@pytest.mark.parametrize("name", sorted(PUBLISHED_QWEN25))
def test_registry_parameter_counts_equal_published_totals(name):
    total, non_embedding = PUBLISHED_QWEN25[name]
    assert REGISTRY[name].params == total
    assert REGISTRY[name].params_non_embedding == non_embedding


def test_prm_is_the_7b_backbone_with_a_score_head():
    prm, policy = REGISTRY["qwen2.5-math-prm-7b"], REGISTRY["qwen2.5-7b"]
    assert prm.head.kind == "score"
    assert prm.head_params() == PRM_HEAD_PARAMS
    lm_head = policy.hidden_size * policy.vocab_size
    assert prm.params == policy.params - lm_head + PRM_HEAD_PARAMS


def test_spec_is_immutable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        REGISTRY["qwen2.5-7b"].num_layers = 3  # type: ignore[misc]


@pytest.mark.parametrize("alias", ["Qwen/Qwen2.5-7B", "qwen2.5-7b", "QWEN2.5-7B-Instruct", "qwen2.5/7b"])
def test_resolve_accepts_hub_style_names(alias):
    assert resolve(alias) is REGISTRY["qwen2.5-7b"]


@pytest.mark.parametrize(("cfg", "published"), [(QWEN3_0_6B, "qwen3-0.6b"), (LLAMA_3_2_1B, "llama-3.2-1b"),
                                                 (MISTRAL_7B_V03, "mistral-7b-v0.3"),
                                                 (MISTRAL_7B_V01, "mistral-7b-v0.1")])
def test_other_families_load_from_files_and_folders(tmp_path, cfg, published):
    path = write_config(tmp_path, published, cfg)
    from_file, from_folder = load_config(path), load_config(path.parent)
    assert from_file == dataclasses.replace(from_folder, source=from_file.source)
    assert from_file.params == PUBLISHED_PARAMS[published]
    assert from_folder.name == published


def test_qwen3_keeps_its_explicit_head_dim():
    spec = spec_from_config(QWEN3_0_6B, "qwen3-0.6b")
    assert spec.head_dim == 128 and spec.q_dim == 2048 != spec.hidden_size
    assert spec.qk_norm and not spec.qkv_bias


REFUSED = {
    # (a qwen3_moe or mixtral config without its top-k is read with transformers' default: test_config_defaults.py)
    "moe": (dict(QWEN3_0_6B, model_type="olmoe", num_experts=128), "mixture-of-experts"),
    "mixtral": (dict(MISTRAL_7B_V03, num_local_experts=8), "mixture-of-experts"),
    "encoder-decoder": ({"model_type": "t5", "is_encoder_decoder": True}, "encoder-decoder"),
    "chunked-layers": (dict(MISTRAL_7B_V01, layer_types=["chunked_attention"] * 32), "layer_types"),
    "layer-types-length": (dict(MISTRAL_7B_V01, layer_types=["full_attention", "sliding_attention"]), "layer_types"),
    "missing-key": ({k: v for k, v in LLAMA_3_2_1B.items() if k != "intermediate_size"}, "missing key"),
    "null-key": (dict(LLAMA_3_2_1B, intermediate_size=None), "missing key intermediate_size"),
    "unknown-type": (dict(LLAMA_3_2_1B, model_type="gpt2"), "not supported"),
    "bad-size": (dict(LLAMA_3_2_1B, hidden_size=-5), "positive integer"),
    "kv-mismatch": (dict(LLAMA_3_2_1B, num_key_value_heads=7), "multiple"),
    # read whether or not a window uses them (transformers' layer_type_validation), flags as booleans, sizes no step
    # of which fits the 1e30 FLOPs flopplan plans
    "layer-types-unused": (dict(QWEN3_0_6B, layer_types=["full_attention"] * 3), "layer_types must list one"),
    "layer-types-number": (dict(QWEN3_0_6B, layer_types=5), "layer_types must list one"),
    "mlp-bias-text": (dict(LLAMA_3_2_1B, mlp_bias="yes"), "mlp_bias must be true or false"),
    "tied-number": (dict(LLAMA_3_2_1B, tie_word_embeddings=1), "tie_word_embeddings must be true or false"),
    # a context that is not a number crashed plan, compare, race design and train with a traceback (a held-out
    # user); a sliding window of 1 keeps transformers' whole cache (cache_utils keeps the last window - 1 tokens)
    "context-text": (dict(LLAMA_3_2_1B, max_position_embeddings="x"), "max_position_embeddings must be a positive"),
    "context-negative": (dict(LLAMA_3_2_1B, max_position_embeddings=-5), "max_position_embeddings must be a pos"),
    "window-1": (dict(MISTRAL_7B_V01, sliding_window=1), "sliding_window 1 is not counted"),
    **{f"huge-{key}": (dict(LLAMA_3_2_1B, **{key: 10**40}), "too large")
       for key in ("num_hidden_layers", "vocab_size", "intermediate_size", "hidden_size")},
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_unsupported_configs_are_refused_with_the_reason(tmp_path, case):
    cfg, reason = REFUSED[case]
    with pytest.raises(UserError, match=reason):
        load_config(write_config(tmp_path, case, cfg))


def test_qwen_sliding_window_follows_max_window_layers():
    """transformers: layer i slides iff use_sliding_window and i >= max_window_layers."""
    base = dict(QWEN3_0_6B, use_sliding_window=True, sliding_window=4096)
    assert spec_from_config(dict(base, max_window_layers=28), "q").sliding_window is None  # all full
    assert spec_from_config(dict(base, max_window_layers=40), "q").sliding_window is None
    uniform = spec_from_config(dict(base, max_window_layers=0), "q")  # all sliding
    assert uniform.sliding_window == 4096 and uniform.layer_types is None
    mixed = spec_from_config(dict(base, max_window_layers=20), "q")
    assert mixed.layer_types == ("full_attention",) * 20 + ("sliding_attention",) * 8
    explicit = spec_from_config(dict(base, layer_types=["full_attention", "sliding_attention"] * 14), "q")
    assert explicit.layer_types[:2] == ("full_attention", "sliding_attention")
    with pytest.raises(UserError, match="max_window_layers"):
        spec_from_config(dict(base, max_window_layers="x"), "q")


def test_unreadable_and_malformed_configs(tmp_path):
    with pytest.raises(UserError, match="cannot read"):
        load_config(tmp_path / "nope" / "config.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        load_config(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(UserError, match="not a JSON object"):
        load_config(bad)
    bad.write_bytes(b"\xff\xfe{}")
    with pytest.raises(UserError, match="UTF-8"):
        load_config(bad)
    bad.write_text(json.dumps(dict(LLAMA_3_2_1B, architectures=[5])))
    with pytest.raises(UserError, match="architectures"):
        load_config(bad)


def test_unknown_model_name():
    with pytest.raises(UserError, match="unknown model"):
        resolve("qwen9-1t")


def test_spec_rejects_impossible_shapes():
    with pytest.raises(ValueError):
        ArchSpec("x", 64, 128, 2, 4, 3, 16, 100, False)  # 4 heads not a multiple of 3 kv heads
    with pytest.raises(ValueError):
        ArchSpec("x", 64, 0, 2, 4, 2, 16, 100, False)


def test_the_tiny_family_spans_ten_times_in_parameters():
    """tiny-s, tiny, tiny-l: one Qwen2 architecture and vocabulary (the built-in tokenizer's 23 symbols in 32
    rows), about 1/3 and 3x tiny, which stays as it was (its FLOPs are pinned across the suite)."""
    from flopplan.arch import TINY_FAMILY

    params = {name: REGISTRY[name].params for name in TINY_FAMILY}
    assert params == {"tiny-s": 100_928, "tiny": 300_160, "tiny-l": 966_912}
    assert 9 < params["tiny-l"] / params["tiny-s"] < 11
    for name in TINY_FAMILY:
        spec = REGISTRY[name]
        assert (spec.family, spec.vocab_size, spec.head_dim, spec.head.kind) == ("qwen2", 32, 32, "lm")
    rm = REGISTRY["tiny-rm"]
    assert rm.head.kind == "score" and [(h.in_features, h.out_features, h.bias) for h in rm.head.layers] == [
        (128, 1, False)]
    assert rm.params_non_embedding == REGISTRY["tiny"].params_non_embedding + 128  # tiny's backbone + its score
