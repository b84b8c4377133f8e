"""The models calibration runs on: registry models and calibration-only architectures (torch-free)."""

from __future__ import annotations

from flopplan.arch import ArchSpec, resolve
from flopplan.errors import UserError

# a calibration-only architecture: a 3.4M-parameter Qwen2 for the CPU quick sweep (with the tiny registry one)
CAL_SMALL = ArchSpec(name="cal-small", hidden_size=256, intermediate_size=704, num_layers=4, num_heads=4,
                     num_kv_heads=2, head_dim=64, vocab_size=32, tie_embeddings=True, family="qwen2",
                     max_position_embeddings=4096, rope_theta=1e6, source="calibration")
CALIBRATION_SPECS = {"cal-small": CAL_SMALL}


def spec_named(name: str) -> ArchSpec:
    return CALIBRATION_SPECS.get(name) or resolve(name)


def sweepable(name: str) -> ArchSpec:
    """A policy the sweep can run: an LM head and room for the built-in tokenizer's ids."""
    from flopplan.grpo.tokenizer import CharTokenizer

    spec = spec_named(name)
    if spec.head.kind != "lm":
        raise UserError(f"{name} has a score head: the timing sweep runs policies (LM heads)")
    if spec.vocab_size < CharTokenizer().vocab_size:
        raise UserError(f"{name} has {spec.vocab_size} embeddings, fewer than the calibration tokenizer's "
                        f"{CharTokenizer().vocab_size}")
    return spec
