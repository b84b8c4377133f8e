"""FLOP formulas of other tools, implemented from their public definitions, for side-by-side error tables.

Each peer is a function ``(spec, tokens, seq) -> FLOPs`` for a *training* step over ``tokens`` tokens in
sequences of ``seq`` tokens (forward + backward), the form all of them publish. Forward-only use (decoding) takes
a third of it, as every one of them is built on ``training = 3 x forward``. None of them models LoRA (frozen base
weights skip wgrad), logits on a subset of positions, KV-cache decoding, or activation recomputation: the tables
show what that costs.

Sources (see also ../shared/reference/flop-conventions.md):

* Hugging Face ``Trainer.floating_point_ops``: ``6 * input_ids.numel() * num_parameters(exclude_embeddings=True)``.
  ``exclude_embeddings`` removes ``nn.Embedding`` weights; an untied LM head (an ``nn.Linear``) stays in, a tied
  one is the embedding and goes. No attention term.
* Kaplan et al. 2020 (arXiv:2001.08361), Table 1: ``C_forward = 2N + 2 n_layer n_ctx d_attn`` per token, training
  ``C = 6N`` per token, ``N`` non-embedding (no embedding, no unembedding). We use the ``6N`` training form.
* PaLM (Chowdhery et al. 2022, appendix B) as implemented by nanoGPT ``estimate_mfu``:
  ``6N + 12 L H Q T`` per token with ``N`` all parameters except position embeddings (so the token embedding,
  tied to the LM head, is in; an untied model counts both tables), ``H`` heads, ``Q`` head dim, ``T`` sequence.
* Megatron-LM ``num_floating_point_operations`` (2025+): per token
  ``6 * L * [h*(q_dim + 2*kv_dim) + q_dim*h + 3*h*I] + 6*h*V``, plus ``6 * q_dim * L * s^2`` per sequence
  (attention, causal-halved: 12 halved to 6); no embedding term, no recompute.
* verl ``utils/flops_counter.py`` for Qwen2/Llama: ``6 * [(3*h*I + h*(q+k+v+o)) * L + 2*V*h] * tokens``
  (the embedding counted as a matmul, 2*V*h) ``+ 6 * sum(s^2) * d * n_q * L`` (causal-halved since 2026-01).
* fvcore ``FlopCountAnalysis``: one multiply-add = one flop, so we double it; a traced forward counts every
  linear layer at every position it runs on but has no handle for ``scaled_dot_product_attention`` (dropped with a
  warning); it counts no backward, so training is taken as 3 x its forward, as users do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flopplan.arch import ArchSpec
from flopplan.attention import ATTENTION_MATMULS, is_attention_term
from flopplan.breakdown import Breakdown
from flopplan.formulas import FMA_FLOPS

FORWARD_BACKWARD = 3
"""Training = forward + backward (dgrad + wgrad) = 3 x forward, the assumption every peer makes."""


def hf_trainer(spec: ArchSpec, tokens: int, seq: int) -> int:
    n = spec.params - spec.embedding_params()
    return FORWARD_BACKWARD * FMA_FLOPS * tokens * n


def kaplan(spec: ArchSpec, tokens: int, seq: int) -> int:
    return FORWARD_BACKWARD * FMA_FLOPS * tokens * spec.params_non_embedding


def palm_nanogpt(spec: ArchSpec, tokens: int, seq: int) -> int:
    # 6N + 12*L*H*Q*T per token: 12 = 3 (fwd+bwd) x 2 (QK^T and AV) x 2 (FMA)
    attention = (FORWARD_BACKWARD * ATTENTION_MATMULS * FMA_FLOPS * spec.num_layers * spec.num_heads * spec.head_dim
                 * seq)
    return tokens * (FORWARD_BACKWARD * FMA_FLOPS * spec.params + attention)


def megatron(spec: ArchSpec, tokens: int, seq: int) -> int:
    h, layers = spec.hidden_size, spec.num_layers
    per_layer = h * (spec.q_dim + 2 * spec.kv_dim) + spec.q_dim * h + 3 * h * spec.intermediate_size
    dense = FORWARD_BACKWARD * FMA_FLOPS * tokens * (layers * per_layer + h * spec.vocab_size)
    sequences = tokens // seq
    attention = FORWARD_BACKWARD * FMA_FLOPS * spec.q_dim * layers * seq * seq * sequences  # 12 causal-halved
    return dense + attention


def verl(spec: ArchSpec, tokens: int, seq: int) -> int:
    h, layers = spec.hidden_size, spec.num_layers
    qkvo = spec.q_dim + spec.kv_dim + spec.kv_dim + spec.q_dim
    dense = FORWARD_BACKWARD * FMA_FLOPS * tokens * ((3 * h * spec.intermediate_size + h * qkvo) * layers
                                                     + 2 * spec.vocab_size * h)
    sequences = tokens // seq
    attention = FORWARD_BACKWARD * FMA_FLOPS * seq * seq * sequences * spec.head_dim * spec.num_heads * layers
    return dense + attention


def fvcore_forward(terms: Breakdown) -> int:
    """What fvcore reports for an executed forward (MACs doubled): every matmul but SDPA attention."""
    return int(sum(value for key, value in terms.items() if not is_attention_term(key)))


PEERS: dict[str, Callable[[ArchSpec, int, int], int]] = {
    "HF Trainer 6ND": hf_trainer,
    "Kaplan 6N": kaplan,
    "PaLM/nanoGPT": palm_nanogpt,
    "Megatron-LM": megatron,
    "verl": verl,
}

PEER_SOURCES: dict[str, str] = {
    "HF Trainer 6ND": "transformers Trainer.floating_point_ops (6 x tokens x non-embedding params)",
    "Kaplan 6N": "Kaplan et al. 2020, arXiv:2001.08361, Table 1",
    "PaLM/nanoGPT": "Chowdhery et al. 2022 (PaLM) appendix B; nanoGPT model.py estimate_mfu",
    "Megatron-LM": "Megatron-LM training.py num_floating_point_operations (2025+)",
    "verl": "verl utils/flops_counter.py, Qwen2/Llama estimator (2026)",
    "fvcore": "fvcore FlopCountAnalysis (MACs, x2; SDPA dropped; forward only, x3 for training)",
}


def relative_error(estimate: Any, exact: Any) -> float:
    return float(estimate) / float(exact) - 1.0
