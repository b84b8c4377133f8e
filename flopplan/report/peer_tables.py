"""The peer-formula error tables: each tool's count against flopplan's exact one, for every Qwen2.5 size."""

from __future__ import annotations

from collections.abc import Mapping

from flopplan.arch import QWEN25_SIZES, REGISTRY, ArchSpec
from flopplan.breakdown import Breakdown
from flopplan.formulas import (
    LoRA,
    Training,
    forward_flops,
    generate_flops,
    train_flops,
)
from flopplan.peers import FORWARD_BACKWARD, PEER_SOURCES, PEERS, fvcore_forward, relative_error
from flopplan.report.tables import Table
from flopplan.units import eng

SEQ_LENGTHS = (512, 2048, 8192)
LORA_RANK = 64
DECODE_PROMPT, DECODE_COMPLETION = 512, 1024
COLUMNS = [*PEERS, "fvcore"]


def lora_update(spec: ArchSpec, seq: int) -> tuple[Breakdown, int]:
    """(a) One GRPO policy update on one sequence: half prompt, half completion, logits on the completion.

    TRL computes ``logits_to_keep = completion + 1`` positions; LoRA r=64 on all seven projections; gradient
    checkpointing on (TRL's default), hence input grads on.
    """
    completion = seq // 2
    training = Training(LoRA(LORA_RANK), checkpointing="non-reentrant")
    exact = train_flops(spec, 1, seq, completion + 1, training)
    fvcore = FORWARD_BACKWARD * fvcore_forward(forward_flops(spec, 1, seq, completion + 1, training.lora))
    return exact, fvcore


def full_step(spec: ArchSpec, seq: int) -> tuple[Breakdown, int]:
    """(b) One full fine-tuning step on one sequence, logits everywhere, no checkpointing."""
    exact = train_flops(spec, 1, seq, seq)
    return exact, FORWARD_BACKWARD * fvcore_forward(forward_flops(spec, 1, seq, seq))


def decoding(spec: ArchSpec) -> tuple[Breakdown, int]:
    """(c) ``generate`` of 1024 tokens after a 512-token prompt (prefill + 1023 decode steps)."""
    exact = generate_flops(spec, 1, DECODE_PROMPT, DECODE_COMPLETION)
    return exact, fvcore_forward(exact)  # fvcore on each traced forward, attention dropped


def _row(name: str, label: str, exact: Breakdown, fvcore: int, peer_counts: Mapping[str, float]) -> list[str]:
    total = int(exact.total)
    errors = [relative_error(peer_counts[p], total) for p in PEERS] + [relative_error(fvcore, total)]
    return [name, label, eng(total), *(f"{100 * e:+.1f}%" for e in errors)]


def peer_error_tables() -> list[Table]:
    """Three tables: LoRA GRPO update, full fine-tuning step, decoding. Cells: peer / exact - 1."""
    head = ["model", "length", "exact (flopplan)", *COLUMNS]
    lora = Table("Relative error of peer formulas: LoRA (r=64) GRPO update step, logits on the completion", head)
    full = Table("Relative error of peer formulas: full fine-tuning step", head)
    decode = Table(f"Relative error of peer formulas: decoding {DECODE_COMPLETION} tokens after a "
                   f"{DECODE_PROMPT}-token prompt", head)
    for name in QWEN25_SIZES:
        spec = REGISTRY[name]
        for seq in SEQ_LENGTHS:
            for table, (exact, fvcore) in ((lora, lora_update(spec, seq)), (full, full_step(spec, seq))):
                peers: dict[str, float] = {p: f(spec, seq, seq) for p, f in PEERS.items()}
                table.rows.append(_row(name, str(seq), exact, fvcore, peers))
        exact, fvcore = decoding(spec)
        total_tokens = DECODE_PROMPT + DECODE_COMPLETION
        per_forward = {p: f(spec, total_tokens, total_tokens) / FORWARD_BACKWARD for p, f in PEERS.items()}
        decode.rows.append(_row(name, f"{DECODE_PROMPT}+{DECODE_COMPLETION}", exact, fvcore, per_forward))
    common = [
        "Cells: peer / exact - 1. Exact = flopplan's closed form, equal to torch FlopCounterMode on the "
        "transformers model (2 FLOPs per multiply-add, dense attention as executed).",
        "Sources: " + "; ".join(f"{k}: {v}" for k, v in PEER_SOURCES.items()) + ".",
    ]
    lora.notes = [
        f"One sequence of L tokens: L/2 prompt, L/2 completion; logits on completion + 1 positions (TRL); LoRA "
        f"r={LORA_RANK} on q,k,v,o,gate,up,down; non-reentrant gradient checkpointing (TRL default), so the "
        "embedding output requires grad.",
        "Peers count 6 FLOPs per parameter per token (wgrad for every weight, logits everywhere, no recompute); "
        "a frozen base needs no wgrad, the LM head runs on half the positions, and checkpointing re-runs the "
        "layers: their errors have both signs and depend on length.",
        *common,
    ]
    full.notes = [
        "One sequence of L tokens, logits on every position, no checkpointing: the setting peers were built for.",
        "Megatron-LM and verl halve attention (causal); the exact count and FlopCounterMode do not (dense).",
        *common,
    ]
    decode.notes = [
        "Exact: transformers generate (prefill with last-position logits, then 1023 KV-cached decode steps). "
        "Peers have no decoding model; each is its training count / 3 on the final 1536-token sequence.",
        "fvcore: each traced forward counted without attention (SDPA is dropped), LM head on the positions run.",
        *common,
    ]
    return [lora, full, decode]
