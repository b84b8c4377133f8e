"""The registry's config.json excerpts (flopplan.catalog): each reads into the registry's spec and writes back."""

from __future__ import annotations

import pytest

from flopplan.arch import REGISTRY, spec_from_config
from flopplan.catalog import CONFIGS, registry_name
from flopplan.hf_config import to_hf_config


@pytest.mark.parametrize("repo", sorted(CONFIGS))
def test_config_round_trip(repo):
    spec = REGISTRY[registry_name(repo)]
    again = spec_from_config(to_hf_config(spec), spec.name, source="registry")
    assert again.moe == spec.moe and again.params == spec.params and again.layer_types == spec.layer_types


PUBLISHED = {"gemma-2-2b": 2_614_341_888, "gemma-2-9b": 9_241_705_984, "gemma-2-27b": 27_227_128_320,
             "gemma-3-1b": 999_885_952, "phi-3-mini-4k-instruct": 3_821_079_552,
             "phi-3-medium-4k-instruct": 13_960_238_080}
"""Published parameter totals (model cards, safetensors indexes)."""
GEMMA3_NON_EMBEDDING_M = {"gemma-3-1b": 698, "gemma-3-4b": 3209, "gemma-3-12b": 10759, "gemma-3-27b": 25600}
"""Gemma 3 report (arXiv:2503.19786) Table 1: non-embedding parameters of the language model, in millions."""


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_totals_match_the_published_sizes(name):
    assert REGISTRY[name].params == PUBLISHED[name]


@pytest.mark.parametrize("name", sorted(GEMMA3_NON_EMBEDDING_M))
def test_gemma3_language_models_match_the_report(name):
    assert round(REGISTRY[name].params_non_embedding / 1e6) == GEMMA3_NON_EMBEDDING_M[name]


def test_gemma3_multimodal_config_reads_its_language_model(tmp_path):
    """A Gemma 3 4B config.json (text_config holding only what differs from transformers' defaults) reads as the
    registry's language model; the vision tower is not counted."""
    from helpers import write_config

    from flopplan.arch import load_config

    cfg = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
           "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                           "num_hidden_layers": 34, "sliding_window": 1024},
           "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"}}
    spec = load_config(write_config(tmp_path, "gemma-3-4b-it", cfg))
    assert spec.params == REGISTRY["gemma-3-4b"].params and spec.layer_types == REGISTRY["gemma-3-4b"].layer_types
