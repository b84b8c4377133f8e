"""``flopplan calibrate``: prove the counts, compare the counters, and fit how fast each phase runs here.

Three jobs, all driving the phase units of :mod:`flopplan.train.phases` (the code the training run uses):

* ``verify``: every registry size built on the meta device, a whole GRPO step (``generate``, LoRA update with
  checkpointing, reference forward, PRM forward) counted by FlopCounterMode against the closed form.
* ``compare_counters``: one GRPO step of a small model on the local device, counted by FlopCounterMode,
  torch.profiler (``with_flops``) and fvcore (MACs x2, a jit-traced forward), each against the closed form,
  with eager attention and with SDPA, so that each counter's blind spots show up as numbers.
* ``sweep`` + ``fit``: each kind of work timed over batch sizes and lengths (warm-up, repeats, median; CUDA
  events on GPU), a time model fitted per kind (see :mod:`flopplan.timing`), part of the sweep held out, and
  the held-out prediction error reported.
"""

from __future__ import annotations

import datetime
import functools
import math
import platform
import random
import statistics
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from flopplan import __version__
from flopplan.arch import ArchSpec, Head, HeadLayer, orm_head, with_head
from flopplan.formulas import Conventions, LoRA, Training, forward_flops, generate_flops, train_flops
from flopplan.hardware import PROFILE_VERSION
from flopplan.measure import counters
from flopplan.measure.models import add_lora, build_model, enable_checkpointing, recommended_threads
from flopplan.timing import PARAMETERS, Call, attention_flops, call_seconds, roofline_seconds, saturating_seconds

KIND_FORM = {"train": "saturating", "forward": "saturating", "prefill": "saturating", "decode": "roofline"}

# a calibration-only architecture: a 3.4M-parameter Qwen2 for the CPU quick sweep (with the tiny registry one)
CAL_SMALL = ArchSpec(name="cal-small", hidden_size=256, intermediate_size=704, num_layers=4, num_heads=4,
                     num_kv_heads=2, head_dim=64, vocab_size=32, tie_embeddings=True, family="qwen2",
                     max_position_embeddings=4096, rope_theta=1e6, source="calibration")
CALIBRATION_SPECS = {"cal-small": CAL_SMALL}


def spec_named(name: str) -> ArchSpec:
    from flopplan.arch import resolve

    return CALIBRATION_SPECS.get(name) or resolve(name)


def sweepable(name: str) -> ArchSpec:
    """A policy the sweep can run: an LM head and room for the built-in tokenizer's ids."""
    from flopplan.errors import UserError
    from flopplan.train.tokenizer import CharTokenizer

    spec = spec_named(name)
    if spec.head.kind != "lm":
        raise UserError(f"{name} has a score head: the timing sweep runs policies (LM heads)")
    if spec.vocab_size < CharTokenizer().vocab_size:
        raise UserError(f"{name} has {spec.vocab_size} embeddings, fewer than the calibration tokenizer's "
                        f"{CharTokenizer().vocab_size}")
    return spec


# -- verify on the meta device ----------------------------------------------------------------------------------

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
        prm = with_head(spec, Head("score", (HeadLayer(spec.hidden_size, spec.hidden_size, True),
                                            HeadLayer(spec.hidden_size, 2, True))), f"{name}-prm")
        rows.append(_row(name, f"PRM-head forward B={b} T={t}", forward_flops(prm, b, t, t).total,
                         counters.forward(build_model(prm), b, t, None)))
        orm = with_head(spec, orm_head(spec), f"{name}-orm")
        rows.append(_row(name, f"ORM-head forward B={b} T={t}", forward_flops(orm, b, t, t).total,
                         counters.forward(build_model(orm), b, t, None)))
    return rows


def _row(model: str, phase: str, closed: int, measured: int) -> dict[str, Any]:
    return {"model": model, "phase": phase, "closed_form": int(closed), "flop_counter": int(measured),
            "exact": int(closed) == int(measured)}


# -- the three counters side by side ----------------------------------------------------------------------------

MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear")


@dataclass
class Setup:
    """A small policy with LoRA and a PRM on one device: what the counter comparison and the sweep run."""

    spec: ArchSpec
    device: torch.device
    dtype: torch.dtype
    attn: str
    policy: Any
    codec: Any
    optimizer: Any
    training: Training
    conv: Conventions
    lora: LoRA

    @staticmethod
    def build(spec: ArchSpec, device: torch.device, dtype: torch.dtype, attn: str, seed: int = 0,
              rank: int = 16) -> Setup:
        from flopplan.train.codecs import char_codec
        from flopplan.train.tokenizer import CharTokenizer

        torch.manual_seed(seed)
        policy: Any = build_model(spec, device=device, dtype=dtype, attn_implementation=attn, seed=seed)
        codec = char_codec(CharTokenizer())
        policy.config.pad_token_id = codec.pad_id
        enable_checkpointing(policy)
        lora = LoRA(rank)
        policy = add_lora(policy, lora)
        optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-5)
        conv = Conventions("dense", "sdpa" if attn == "sdpa" else "eager")
        return Setup(spec, device, dtype, attn, policy, codec, optimizer, Training(lora, "non-reentrant"), conv, lora)

    def prompts(self, batch: int, length: int, seed: int = 0) -> list[list[int]]:
        rng = random.Random(seed)
        return [[self.codec.pad_id + 4 + rng.randrange(10) for _ in range(length)] for _ in range(batch)]

    def rollouts(self, batch: int, prompt: int, completion: int) -> Any:
        from flopplan.train.phases import Block, Rollouts

        rng = random.Random(1)
        prompts = self.prompts(batch, prompt)
        completions = [[4 + rng.randrange(10) for _ in range(completion)] for _ in range(batch)]
        return Rollouts(prompts, completions, ["" for _ in range(batch)], [Block(0, batch, prompt, completion)])

    # the phase units, as the training run calls them
    def generate(self, batch: int, prompt: int, completion: int, measure: bool = False) -> Any:
        from flopplan.train import phases as P

        _, charges = P.generate(self.policy, self.codec, self.prompts(batch, prompt), batch, completion, 1.0, True,
                                self.spec, self.lora, self.conv, measure, min_new_tokens=completion)
        return charges[0]

    def score(self, batch: int, prompt: int, completion: int, measure: bool = False) -> Any:
        from flopplan.train import phases as P

        rollouts = self.rollouts(batch, prompt, completion)
        batches = P.scoring_batches(rollouts, self.codec, batch, self.device)
        _, charge = P.score("old_logprobs", self.policy, batches, rollouts, 1.0, True, self.spec, self.lora,
                            self.conv, measure)
        return charge

    def update(self, batch: int, prompt: int, completion: int, measure: bool = False) -> Any:
        from flopplan.train import phases as P

        rollouts = self.rollouts(batch, prompt, completion)
        batches = P.scoring_batches(rollouts, self.codec, batch, self.device)
        advantages = torch.linspace(-1, 1, batch, device=self.device)
        _, charge = P.update(self.policy, self.optimizer, batches, rollouts, advantages, None, None, P.LossConfig(),
                             True, batch, 1.0, self.spec, self.training, self.conv, measure)
        return charge


def _profiler_flops(fn: Callable[[], Any]) -> tuple[int, int]:
    """(all ops, matmul ops) FLOPs that torch.profiler(with_flops=True) attributes to what ``fn`` runs."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities, with_flops=True) as prof:
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
    b, p, k = 4, 48, 16
    rows = []
    for attn in attns:
        s = Setup.build(spec, device, dtype, attn)
        phases: list[tuple[str, Callable[[bool], Any], Any]] = [
            ("rollout: generate (prefill + 15 decode steps)", functools.partial(s.generate, b, p, k), None),
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
                from flopplan.train import phases as P

                batch = P.scoring_batches(rollouts, s.codec, b, device)[0]
                fv = _fvcore_flops(module, (batch.input_ids, batch.attention_mask))
            rows.append({"attention": attn, "phase": label, "closed_form": charge.executed_total,
                         "flop_counter": charge.measured, "profiler_all_ops": total, "profiler_matmul": matmul,
                         "fvcore": fv})
        rm = build_model(with_head(spec, Head("score", (HeadLayer(spec.hidden_size, spec.hidden_size, True),
                                                        HeadLayer(spec.hidden_size, 2, True))), "prm"),
                         device=device, dtype=dtype, attn_implementation=attn, seed=1).eval()
        t = p + k + 8
        ids = torch.full((b, t), 5, dtype=torch.long, device=device)
        mask = torch.ones_like(ids)
        prm_spec = with_head(spec, Head("score", (HeadLayer(spec.hidden_size, spec.hidden_size, True),
                                                  HeadLayer(spec.hidden_size, 2, True))), "prm")
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


# -- timing sweeps ----------------------------------------------------------------------------------------------

@dataclass
class Measurement:
    model: str
    kind: str
    batch: int
    prompt: int
    completion: int
    flops: float
    tokens: float
    weight_elements: float
    kv_elements: float
    seconds: float
    layers: int = 1
    attention_flops: float = 0.0
    repeats: list[float] = field(default_factory=list)
    heldout: bool = False

    def call(self) -> Call:
        return Call(self.flops, self.tokens, self.weight_elements, self.kv_elements, self.layers,
                    self.attention_flops)


QUICK_GRID = {
    "prefill": [(b, p, 1) for b in (1, 4, 16) for p in (16, 48, 128)],
    "forward": [(b, p, 32) for b in (1, 4, 16) for p in (16, 48, 96)],
    "train": [(b, p, 32) for b in (1, 4, 8) for p in (16, 48, 96)],
    "decode": [(b, p, 17) for b in (1, 4, 16) for p in (16, 96, 256)],
}
FULL_GRID = {  # CPU, a real size (e.g. qwen2.5-0.5b in fp32): minutes per model
    "prefill": [(b, p, 1) for b in (1, 2, 4) for p in (32, 128, 256)],
    "forward": [(b, p, 32) for b in (1, 2, 4) for p in (32, 96, 224)],
    "train": [(b, p, 32) for b in (1, 2, 4) for p in (32, 96, 224)],
    "decode": [(b, p, 9) for b in (1, 4, 16) for p in (32, 256, 512)],
}
GPU_GRID = {  # one GPU, 0.5B-1.5B in bf16: a few minutes per model
    "prefill": [(b, p, 1) for b in (1, 8, 32) for p in (128, 512, 2048)],
    "forward": [(b, p, 256) for b in (1, 8, 32) for p in (128, 512, 1792)],
    "train": [(b, p, 256) for b in (1, 4, 16) for p in (128, 512, 1792)],
    "decode": [(b, p, 33) for b in (1, 16, 64) for p in (128, 1024, 2048)],
}


def _timed(fn: Callable[[], Any], repeats: int) -> list[float]:
    fn()  # warm-up
    return [fn().seconds for _ in range(repeats)]


def measure_point(s: Setup, name: str, kind: str, b: int, p: int, k: int, repeats: int) -> Measurement:
    """Time one shape of one kind of work through the phase units; the FLOPs are the closed form's."""
    spec = s.spec
    L = spec.num_layers
    if kind == "prefill":
        times = _timed(lambda: s.generate(b, p, 1), repeats)
        terms = forward_flops(spec, b, p, 1, s.lora, s.conv)
        return Measurement(name, kind, b, p, 1, float(terms.total), b * p, 0, 0, statistics.median(times), L,
                           float(attention_flops(terms)), times)
    if kind == "decode":  # k - 1 decode steps: the difference of two generate calls, prefill cancelled
        s.generate(b, p, k), s.generate(b, p, 1)  # warm-up
        per_step = []
        for _ in range(repeats):
            longer = s.generate(b, p, k).seconds
            per_step.append(max(longer - s.generate(b, p, 1).seconds, 1e-9) / (k - 1))
        steps = generate_flops(spec, b, p, k, s.lora, s.conv).total - forward_flops(spec, b, p, 1, s.lora,
                                                                                     s.conv).total
        context = p + (k - 2) / 2  # mean tokens already cached over the decode steps
        kv = b * (context + 1) * 2 * L * spec.kv_dim
        return Measurement(name, kind, b, p, k, float(steps) / (k - 1), b, spec.params, kv,
                           statistics.median(per_step), L, 0.0, per_step)
    if kind == "forward":
        times = _timed(lambda: s.score(b, p, k), repeats)
        terms = forward_flops(spec, b, p + k, k + 1, s.lora, s.conv)
    else:
        times = _timed(lambda: s.update(b, p, k), repeats)
        terms = train_flops(spec, b, p + k, k + 1, s.training, s.conv)
    return Measurement(name, kind, b, p, k, float(terms.total), b * (p + k), 0, 0, statistics.median(times), L,
                       float(attention_flops(terms)), times)


def sweep(models: list[str], device: torch.device, quick: bool, repeats: int = 5,
          progress: Callable[[str, int, int], None] = lambda *_: None) -> list[Measurement]:
    """Time every kind of work over the grid, through the phase units; median of ``repeats`` after a warm-up."""
    grid = QUICK_GRID if quick else (GPU_GRID if device.type == "cuda" else FULL_GRID)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    attn = "sdpa" if device.type == "cuda" else "eager"
    out: list[Measurement] = []
    total = len(models) * sum(len(v) for v in grid.values())
    for name in models:
        spec = sweepable(name)
        threads = recommended_threads(spec.params) if device.type == "cpu" else None
        with _threads(threads):
            s = Setup.build(spec, device, dtype, attn)
            for kind, points in grid.items():
                for b, p, k in points:
                    progress(f"{name} {kind} B={b} P={p}" + (f" K={k}" if kind != "prefill" else ""), len(out),
                             total)
                    out.append(measure_point(s, name, kind, b, p, k, repeats))
    progress("done", len(out), total)
    return out


@contextmanager
def _threads(n: int | None) -> Iterator[None]:
    before = torch.get_num_threads()
    if n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# -- fitting ----------------------------------------------------------------------------------------------------

def _predict(kind: str, params: dict[str, float], ms: list[Measurement], bytes_per_element: float) -> list[float]:
    return [call_seconds(KIND_FORM[kind], params, m.call(), bytes_per_element) for m in ms]


def fit_kind(kind: str, train: list[Measurement], bytes_per_element: float) -> dict[str, float]:
    """Least squares on log time (relative errors), parameters kept positive through their logs."""
    import numpy as np
    from scipy.optimize import least_squares

    flops = np.array([m.flops for m in train])
    seconds = np.array([m.seconds for m in train])
    layers = np.array([float(m.layers) for m in train])
    small = min(seconds) * 0.3
    if KIND_FORM[kind] == "saturating":
        tokens = np.array([m.tokens for m in train])
        attention = np.array([m.attention_flops for m in train])
        rate = max(flops / seconds)
        x0 = [math.log(rate), math.log(float(np.median(tokens))), math.log(small), math.log(small / max(layers)),
              math.log(rate / 4)]

        def model(theta: Any) -> Any:
            params = dict(zip(PARAMETERS["saturating"], np.exp(theta), strict=True))
            return saturating_seconds(params, flops, tokens, layers, attention)
    else:
        elements = np.array([m.weight_elements + m.kv_elements for m in train])
        x0 = [math.log(max(flops / seconds)), math.log(max(elements * bytes_per_element / seconds)),
              math.log(small), math.log(small / max(layers))]

        def model(theta: Any) -> Any:
            params = dict(zip(PARAMETERS["roofline"], np.exp(theta), strict=True))
            return roofline_seconds(params, flops, elements, layers, bytes_per_element)

    result = least_squares(lambda th: np.log(model(th)) - np.log(seconds), x0, method="trf", max_nfev=20000)
    return {name: float(v) for name, v in zip(PARAMETERS[KIND_FORM[kind]], np.exp(result.x), strict=True)}


def _errors(kind: str, params: dict[str, float], group: list[Measurement], bytes_per_element: float) -> list[float]:
    predicted = _predict(kind, params, group, bytes_per_element)
    return [p / m.seconds - 1 for p, m in zip(predicted, group, strict=True)]


def fit(measurements: list[Measurement], bytes_per_element: float, holdout: float = 0.25,
        seed: int = 0) -> dict[str, dict[str, Any]]:
    """Fit each kind on a random 75 %, report the error on the held-out 25 % (never used for the fit)."""
    rng = random.Random(seed)
    out: dict[str, dict[str, Any]] = {}
    for kind in KIND_FORM:
        ms = [m for m in measurements if m.kind == kind]
        if len(ms) < 4:
            continue
        order = list(range(len(ms)))
        rng.shuffle(order)
        n_hold = max(2, round(holdout * len(ms)))
        hold = set(order[:n_hold])
        for i, m in enumerate(ms):
            m.heldout = i in hold
        train = [m for m in ms if not m.heldout]
        test = [m for m in ms if m.heldout]
        params = fit_kind(kind, train, bytes_per_element)
        train_err = _errors(kind, params, train, bytes_per_element)
        test_err = _errors(kind, params, test, bytes_per_element)
        out[kind] = {
            "form": KIND_FORM[kind], **params,
            "points": len(ms), "fit_points": len(train), "heldout_points": len(test),
            "fit_residuals": [round(e, 4) for e in train_err],
            "heldout_errors": [round(e, 4) for e in test_err],
            "heldout_error": {"median": round(statistics.median(abs(e) for e in test_err), 4),
                              "mean": round(statistics.fmean(abs(e) for e in test_err), 4),
                              "max": round(max(abs(e) for e in test_err), 4)},
        }
    return out


# -- profile and report -----------------------------------------------------------------------------------------

def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"CPU {cpu} ({torch.get_num_threads()} threads)"


def profile_data(device: torch.device, models: list[str], fits: dict[str, dict[str, Any]],
                 measurements: list[Measurement], quick: bool,
                 counters: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    import transformers

    dtype = "bfloat16" if device.type == "cuda" else "float32"
    bytes_per_element = 2.0 if device.type == "cuda" else 4.0
    throughput = {k: f.get("throughput_max", f.get("throughput", 0.0)) for k, f in fits.items()}
    peak = max(throughput.values()) if throughput else 1.0
    time_model = {k: {"form": f["form"], **{p: f[p] for p in PARAMETERS[f["form"]]}} for k, f in fits.items()}
    return {
        "flopplan_profile_version": PROFILE_VERSION,
        "device": device_name(device),
        "device_type": device.type,
        "dtype": dtype,
        "attn_implementation": "sdpa" if device.type == "cuda" else "eager",
        "bytes_per_element": bytes_per_element,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "flopplan_version": __version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "models": models,
        "model_params": {name: spec_named(name).params for name in models},
        "sweep": "quick" if quick else "full",
        "source": f"calibrated {datetime.date.today().isoformat()}",
        # the simple interface (FLOPs / (peak x efficiency)) for readers that ignore the time model
        "peak_flops": peak,
        "efficiency": {k: (throughput[k] / peak if throughput.get(k) else 1.0) for k in KIND_FORM},
        "time_model": time_model,
        "fit": fits,
        "measurements": [asdict(m) for m in measurements],
        "counters": counters,
    }
