"""Peer formulas against identities that follow from their definitions."""

from __future__ import annotations

import pytest

from flopplan.arch import QWEN25_SIZES, REGISTRY
from flopplan.formulas import train_flops
from flopplan.peers import hf_trainer, kaplan, megatron, palm_nanogpt, verl


def attention(terms):
    return sum(v for k, v in terms.items() if "attn_" in k)


@pytest.mark.parametrize("name", QWEN25_SIZES)
@pytest.mark.parametrize("seq", [512, 4096])
def test_megatron_is_exact_dense_part_plus_half_the_attention(name, seq):
    """Megatron counts every GEMM and the LM head like FlopCounterMode, but halves attention (causal)."""
    spec = REGISTRY[name]
    exact = train_flops(spec, 1, seq, seq)
    assert megatron(spec, seq, seq) == exact.total - attention(exact) // 2


@pytest.mark.parametrize("name", QWEN25_SIZES)
def test_verl_adds_the_embedding_as_a_matmul_to_megatron(name):
    spec = REGISTRY[name]
    assert verl(spec, 1024, 1024) - megatron(spec, 1024, 1024) == 6 * 1024 * spec.vocab_size * spec.hidden_size


@pytest.mark.parametrize("name", QWEN25_SIZES)
def test_parameter_based_peers(name):
    spec = REGISTRY[name]
    assert kaplan(spec, 100, 100) == 600 * spec.params_non_embedding
    assert hf_trainer(spec, 100, 100) == 600 * (spec.params - spec.embedding_params())
    if spec.tie_embeddings:  # the tied LM head is the embedding: HF's exclusion drops it, like Kaplan
        assert hf_trainer(spec, 100, 100) == kaplan(spec, 100, 100)


@pytest.mark.parametrize("name", [n for n in QWEN25_SIZES if REGISTRY[n].tie_embeddings])
def test_palm_differs_from_exact_only_by_biases_and_norms_for_tied_models(name):
    """With a tied head, N counts the LM head once and 12LHQT is dense attention: only the parameters that are
    no matmul weight (biases, norm scales) make the difference, 6 FLOPs each per token."""
    spec = REGISTRY[name]
    matmul_weights = spec.num_layers * sum(i * o for i, o in spec.projection_shapes().values()) + \
        spec.vocab_size * spec.hidden_size
    seq = 2048
    exact = train_flops(spec, 1, seq, seq).total
    assert palm_nanogpt(spec, seq, seq) - exact == 6 * seq * (spec.params - matmul_weights)
