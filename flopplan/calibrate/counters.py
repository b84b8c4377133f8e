"""The counters side by side: one small GRPO step counted by FlopCounterMode, torch.profiler (``with_flops``) and
fvcore (MACs x2, a jit-traced forward), each against the closed form, with eager attention and with SDPA, so that
each counter's blind spots show up as numbers."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from flopplan.arch import ArchSpec, prm_head, with_head
from flopplan.calibrate.harness import PhaseHarness
from flopplan.formulas import forward_flops
from flopplan.grpo.batching import scoring_batches
from flopplan.measure import counters
from flopplan.measure.models import build_model

MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear")
COUNTER_SHAPE = {"batch": 4, "prompt": 48, "completion": 16}
"""The GRPO step the counters are compared on: 4 rollouts of a 48-token prompt and 16 completion tokens."""


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """The profiler's C++ side (kineto) logs two lines per session to file descriptor 2, whatever the log level:
    silence that descriptor while it runs (Python's own stderr is untouched)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _profiler_flops(fn: Callable[[], Any]) -> tuple[int, int]:
    """(all ops, matmul ops) FLOPs that torch.profiler(with_flops=True) attributes to what ``fn`` runs."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with _native_stderr_silenced(), profile(activities=activities, with_flops=True) as prof:
        fn()
    events = prof.key_averages()
    total = sum(int(e.flops or 0) for e in events)
    matmul = sum(int(e.flops or 0) for e in events if e.key in MATMUL_OPS)
    return total, matmul


def _fvcore_flops(module: Any, inputs: tuple[Any, ...]) -> int | None:
    """fvcore's count of a traced forward, MACs doubled to FLOPs (None when fvcore is missing)."""
    try:
        from fvcore.nn import FlopCountAnalysis
    except ImportError:
        return None
    import logging

    logging.getLogger("fvcore").setLevel(logging.ERROR)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        analysis = FlopCountAnalysis(module, inputs)
        analysis.unsupported_ops_warnings(False)
        analysis.uncalled_modules_warnings(False)
        return 2 * int(analysis.total())


class _LogitsOf(torch.nn.Module):
    """Wrap a transformers model so that forward returns a tensor (what jit tracing needs)."""

    def __init__(self, model: Any, **kwargs: Any) -> None:
        super().__init__()
        self.model = model
        self.kwargs = kwargs

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, **self.kwargs)
        return out.logits if hasattr(out, "logits") else out


def compare_counters(spec: ArchSpec, device: torch.device, dtype: torch.dtype,
                     attns: tuple[str, ...] = ("eager", "sdpa")) -> list[dict[str, Any]]:
    """One small GRPO step per attention implementation, counted four ways."""
    b, p, k = (COUNTER_SHAPE[key] for key in ("batch", "prompt", "completion"))
    rows = []
    for attn in attns:
        s = PhaseHarness.build(spec, device, dtype, attn)
        phases: list[tuple[str, Callable[[bool], Any], Any]] = [
            (f"rollout: generate (prefill + {k - 1} decode steps)", functools.partial(s.generate, b, p, k), None),
            ("old logprobs: forward, logits on completion", functools.partial(s.score, b, p, k),
             (_LogitsOf(s.policy, logits_to_keep=k + 1), s.rollouts(b, p, k))),
            ("update: LoRA forward + backward + recompute", functools.partial(s.update, b, p, k), None),
        ]
        for label, run, traced in phases:
            charge = run(True)  # closed form (executed) and FlopCounterMode
            total, matmul = _profiler_flops(functools.partial(run, False))
            fv = None
            if traced is not None:
                module, rollouts = traced
                batch = scoring_batches(rollouts, s.codec.pad_id, b, device)[0]
                fv = _fvcore_flops(module, (batch.input_ids, batch.attention_mask))
            blind = sum(charge.shapes.get("blind_spots", {}).values())  # what the meter adds to the counter's
            rows.append({"attention": attn, "phase": label, "closed_form": charge.executed_total,
                         "flop_counter": None if charge.measured is None else charge.measured - blind,
                         "profiler_all_ops": total, "profiler_matmul": matmul, "fvcore": fv})
        prm_spec = with_head(spec, prm_head(spec.hidden_size), "prm")
        rm = build_model(prm_spec, device=device, dtype=dtype, attn_implementation=attn, seed=1).eval()
        t = p + k + 8
        ids = torch.full((b, t), 5, dtype=torch.long, device=device)
        mask = torch.ones_like(ids)
        closed = int(forward_flops(prm_spec, b, t, t, None, s.conv).total)
        def prm_forward(rm: Any = rm, ids: torch.Tensor = ids, mask: torch.Tensor = mask) -> Any:
            return rm(input_ids=ids, attention_mask=mask)

        with torch.no_grad():
            measured = counters.count_flops(prm_forward)
            total, matmul = _profiler_flops(prm_forward)
        rows.append({"attention": attn, "phase": "reward: PRM forward", "closed_form": closed,
                     "flop_counter": measured, "profiler_all_ops": total, "profiler_matmul": matmul,
                     "fvcore": _fvcore_flops(_LogitsOf(rm), (ids, mask))})
    return rows
