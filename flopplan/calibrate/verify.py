"""Verify the closed form against FlopCounterMode for the phases of a GRPO step of every registry model, built on
the meta device (no weights, no memory)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flopplan.arch import orm_head, prm_head, with_head
from flopplan.calibrate.specs import spec_named
from flopplan.formulas import LoRA, Training, forward_flops, generate_flops, train_flops
from flopplan.measure import counters
from flopplan.measure.models import build_model

VERIFY = {"batch": 2, "prompt": 16, "completion": 3, "seq": 24, "logits": 9, "rank": 16}


def verify(models: list[str], progress: Callable[[str], None] = lambda _: None) -> list[dict[str, Any]]:
    """FlopCounterMode vs closed form for the phases of a GRPO step, per registry model (meta device): generate
    and the old-logprob forward with LoRA active, the reference forward (adapter disabled), a LoRA update with
    checkpointing, a full fine-tuning update, and PRM- and ORM-head forwards (a score-head model: its forward)."""
    b, p, k, t, n, r = (VERIFY[x] for x in ("batch", "prompt", "completion", "seq", "logits", "rank"))
    rows: list[dict[str, Any]] = []
    lora = LoRA(r)
    training = Training(lora, "non-reentrant")
    for name in models:
        spec = spec_named(name)
        if spec.head.kind == "score":
            progress(f"{name}: PRM forward")
            model = build_model(spec)
            rows.append(_row(name, f"reward forward B={b} T={t}", forward_flops(spec, b, t, t).total,
                             counters.forward(model, b, t, None)))
            continue
        progress(f"{name}: generate")
        policy: Any = counters.prepare_training(build_model(spec), Training(lora))
        rows.append(_row(name, f"generate+LoRA B={b} P={p} K={k}", generate_flops(spec, b, p, k, lora).total,
                         counters.generate(policy, b, p, k)))
        progress(f"{name}: old logprobs and reference forwards")
        rows.append(_row(name, f"old-logprob forward+LoRA B={b} T={t} logits={n}",
                         forward_flops(spec, b, t, n, lora).total, counters.forward(policy, b, t, n)))
        with policy.disable_adapter():
            rows.append(_row(name, f"reference forward B={b} T={t} logits={n}", forward_flops(spec, b, t, n).total,
                             counters.forward(policy, b, t, n)))
        progress(f"{name}: LoRA update")
        policy = counters.prepare_training(build_model(spec), training)
        rows.append(_row(name, f"LoRA r={r} update+ckpt B={b} T={t} logits={n}",
                         train_flops(spec, b, t, n, training).total, counters.train_step(policy, b, t, n, training)))
        progress(f"{name}: full fine-tuning update")
        full = Training()
        policy = counters.prepare_training(build_model(spec), full)
        rows.append(_row(name, f"full update B={b} T={t} logits={n}", train_flops(spec, b, t, n, full).total,
                         counters.train_step(policy, b, t, n, full)))
        progress(f"{name}: reward heads")
        prm = with_head(spec, prm_head(spec.hidden_size), f"{name}-prm")
        rows.append(_row(name, f"PRM-head forward B={b} T={t}", forward_flops(prm, b, t, t).total,
                         counters.forward(build_model(prm), b, t, None)))
        orm = with_head(spec, orm_head(spec), f"{name}-orm")
        rows.append(_row(name, f"ORM-head forward B={b} T={t}", forward_flops(orm, b, t, t).total,
                         counters.forward(build_model(orm), b, t, None)))
    return rows


def _row(model: str, phase: str, closed: int, measured: int) -> dict[str, Any]:
    return {"model": model, "phase": phase, "closed_form": int(closed), "flop_counter": int(measured),
            "exact": int(closed) == int(measured)}
