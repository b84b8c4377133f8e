"""A spec written back as a Hugging Face config.json (flopplan.hf_config) reads back as the same spec."""

from __future__ import annotations

import pytest
from configs import LLAMA_3_2_1B, MISTRAL_7B_V01, MISTRAL_7B_V03, QWEN3_0_6B

from flopplan.arch import REGISTRY, spec_from_config
from flopplan.hf_config import to_hf_config


def test_hf_config_round_trip():
    for spec in REGISTRY.values():
        again = spec_from_config(to_hf_config(spec), spec.name)
        fields = ("hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads", "head_dim",
                  "vocab_size", "tie_embeddings", "qkv_bias", "head", "params")
        assert [getattr(again, f) for f in fields] == [getattr(spec, f) for f in fields]


@pytest.mark.parametrize(("name", "cfg", "architecture"), [
    ("qwen3-0.6b", QWEN3_0_6B, "Qwen3ForCausalLM"), ("llama-3.2-1b", LLAMA_3_2_1B, "LlamaForCausalLM"),
    ("mistral-7b-v0.1", MISTRAL_7B_V01, "MistralForCausalLM"), ("mistral-7b-v0.3", MISTRAL_7B_V03,
                                                                "MistralForCausalLM")])
def test_the_other_families_round_trip_to_an_equal_spec(name, cfg, architecture):
    """The registry holds only Qwen2 specs: the families read from files (biases, qk-norm, a sliding window) must
    come back whole too."""
    spec = spec_from_config(cfg, name)
    written = to_hf_config(spec)
    assert written["architectures"] == [architecture] and written["model_type"] == spec.family
    assert spec_from_config(written, name) == spec


@pytest.mark.parametrize("architecture", ["Qwen2ForRewardModel", "Qwen2ForProcessRewardModel",
                                          "Qwen2ForSequenceClassification"])
def test_each_score_head_round_trips_to_its_class(architecture):
    """Qwen2.5-Math-RM's two-layer head was written as a process reward model's class (two labels on reading)."""
    cfg = {"architectures": [architecture], "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 96,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 77,
           "num_labels": 3, "rope_theta": 1e6}
    spec = spec_from_config(cfg, "rm")
    written = to_hf_config(spec)
    assert written["architectures"] == [architecture] and spec_from_config(written, "rm") == spec


def test_a_reward_folders_class_is_read_from_a_config_that_is_a_json_object(tmp_path):
    """A review: a config.json holding a list crashed `train --reward-model-path` with an AttributeError."""
    from flopplan.errors import UserError
    from flopplan.hf_config import architecture_name

    (tmp_path / "config.json").write_text("[]")
    with pytest.raises(UserError, match=r"config '.*config\.json' is not a JSON object"):
        architecture_name(tmp_path)
