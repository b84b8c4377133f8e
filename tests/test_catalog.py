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
