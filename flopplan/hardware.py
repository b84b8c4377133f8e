"""Hardware profiles: FLOPs <-> seconds, GPU-hours and dollars, per kind of phase.

A profile turns the FLOPs of a phase into seconds on one device. The datasheet profiles divide by the dense
bf16 peak times a default efficiency per kind of work; a calibrated profile (``flopplan calibrate``) replaces the
efficiencies with a fitted time model of the local hardware. Kinds of work (see ``cost.PHASE_KIND``):

* ``train``   forward + backward: compute-bound large GEMMs;
* ``forward`` no-grad teacher-forced scoring passes (old logprobs, reference, reward model);
* ``prefill`` the prompt pass of generation;
* ``decode``  one token per sequence per step: bound by memory bandwidth (weights and KV cache are re-read every
  step), far below the compute peak, and much lower in HF ``generate`` than in vLLM's batched engine.

The default efficiencies are rough, stated starting points, not measurements: training MFU of 35-45 % is
typical of well-tuned bf16 runs (Megatron-LM and torchtitan report numbers in this range), prefill and scoring
passes do somewhat better, decode is an order of magnitude worse. Calibrate to replace them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flopplan import serial
from flopplan.errors import UserError, is_number
from flopplan.fileio import read_json
from flopplan.timing import (
    DEFAULT_CHECKPOINT_EVERY,
    FORMS,
    NON_PHASE_TERMS,
    OPTIONAL_PARAMETERS,
    PARAMETERS,
    Call,
    RunWork,
    call_seconds,
    run_non_phase_seconds,
    total,
)


@dataclass(frozen=True)
class Datasheet:
    """A device's dense bf16 peak (no sparsity) and its memory bandwidth, from the vendor's datasheet."""

    peak_flops: float
    bandwidth: float  # bytes/s of HBM (GDDR for the L40S)
    source: str


DATASHEETS: dict[str, Datasheet] = {
    # NVIDIA H100/H200/A100/L40S/B200 and AMD MI300X product datasheets (dense, no sparsity); the same peaks
    # verl and torchtitan use for MFU
    "h100": Datasheet(989e12, 3.35e12, "H100 SXM5 80GB: 989 TFLOP/s bf16, 3.35 TB/s HBM3"),
    "h100-pcie": Datasheet(756e12, 2.0e12, "H100 PCIe 80GB: 756 TFLOP/s bf16, 2.0 TB/s HBM2e"),
    "h200": Datasheet(989e12, 4.8e12, "H200 SXM 141GB: 989 TFLOP/s bf16, 4.8 TB/s HBM3e"),
    "a100": Datasheet(312e12, 2.039e12, "A100 SXM4 80GB: 312 TFLOP/s bf16, 2.039 TB/s HBM2e"),
    "l40s": Datasheet(362e12, 0.864e12, "L40S: 362 TFLOP/s bf16, 864 GB/s GDDR6"),
    "b200": Datasheet(2.25e15, 8.0e12, "B200: 2.25 PFLOP/s bf16, 8 TB/s HBM3e"),
    "mi300x": Datasheet(1307e12, 5.3e12, "MI300X: 1307 TFLOP/s bf16, 5.3 TB/s HBM3"),
}
PEAK_BF16_FLOPS: dict[str, float] = {name: sheet.peak_flops for name, sheet in DATASHEETS.items()}

DEFAULT_EFFICIENCY: dict[str, dict[str, float]] = {
    # fraction of the compute peak each kind of work reaches, by rollout engine (decode: its matmuls, when the
    # roofline below makes it compute-bound)
    "hf": {"train": 0.40, "forward": 0.45, "prefill": 0.45, "decode": 0.40},
    "vllm": {"train": 0.40, "forward": 0.45, "prefill": 0.50, "decode": 0.50},
}
DEFAULT_DECODE: dict[str, dict[str, float]] = {
    # decode as a roofline: the larger of its FLOPs at the compute rate and the weights plus KV cache it reads at
    # a fraction of the memory bandwidth, plus a fixed cost per layer per step. HF generate runs eager kernels
    # launched from Python (tens of microseconds per layer per step, a third of the bandwidth); vLLM's fused
    # kernels and CUDA graphs come closer to the roofline. Stated starting points, not measurements.
    "hf": {"bandwidth_efficiency": 0.30, "overhead_layer": 1.0e-4},
    "vllm": {"bandwidth_efficiency": 0.60, "overhead_layer": 1.0e-5},
}
KINDS = ("train", "forward", "prefill", "decode")


MAX_RATE = 1e18
"""Nor is a throughput (FLOP/s) or bandwidth (bytes/s) of one device above an exa-unit per second: a hundred times
the fastest accelerators' dense peak (about 1e16 FLOP/s), where a typo (1e40) would price any run at nothing."""
MAX_TOKENS_HALF = 1e9
"""Nor a half-saturation point past a billion tokens in one call: the throughput curve would never rise."""
MAX_BYTES_PER_ELEMENT = 8
"""The widest element a model is stored in: float64."""
METADATA = {"device_type": str, "dtype": str, "attn_implementation": str, "torch": str, "transformers": str,
            "flopplan_version": str, "date": str, "sweep": str, "models": list, "fit": dict}
"""What calibrate writes beside the profile, by type: read by no price, refused when of another type."""


@dataclass(frozen=True)
class Profile:
    """How fast each kind of work runs on one device. ``seconds`` is the only interface the planner uses."""

    device: str = field(metadata=serial.spec(check=serial.Check(lambda v: bool(v.strip()), "a non-empty name")))
    peak_flops: float = field(metadata=serial.spec(check=serial.Check(
        lambda v: 0 < v <= MAX_RATE, f"a throughput in (0, {MAX_RATE:g}] FLOP/s")))
    # kind -> fraction of peak
    efficiency: dict[str, float] = field(default_factory=dict, metadata=serial.spec(
        read=lambda v, w: _efficiency(v, w)))
    # dollars per device-hour
    price_per_hour: float | None = field(default=None, metadata=serial.spec(check=serial.POSITIVE))
    source: str = "datasheet"
    # kind -> {"form": ..., parameters}: calibrated
    time_model: dict[str, dict[str, Any]] | None = field(default=None, metadata=serial.spec(
        omit=True, read=lambda v, w: _time_model(v, w)))
    # weights and KV cache (bf16), for the decode roofline
    bytes_per_element: float = field(default=2.0, metadata=serial.spec(check=serial.Check(
        lambda v: 0 < v <= MAX_BYTES_PER_ELEMENT, f"a size in (0, {MAX_BYTES_PER_ELEMENT}] bytes")))
    # models (name -> parameters) a calibrated profile was fitted on
    # (a model whose one-token forward, 2 FLOPs per parameter, passes the 1e30 FLOPs flopplan plans is none)
    fitted_on: dict[str, int] | None = field(default=None, metadata=serial.spec(
        key="model_params", omit=True, check=serial.Check(lambda d: all(0 < v <= 5e29 for v in d.values()),
                                                          "a map of model names to parameter counts")))
    # term -> coefficients (timing.NON_PHASE_TERMS)
    non_phase: dict[str, dict[str, float]] | None = field(default=None, metadata=serial.spec(
        omit=True, read=lambda v, w: _non_phase(v, w)))
    # kind -> {"tokens": [lo, hi]} per call
    fitted_shapes: dict[str, dict[str, list[float]]] | None = field(default=None, metadata=serial.spec(
        omit=True, read=lambda v, w: _fitted_shapes(v, w)))
    # the run folders a profile learned from (flopplan calibrate --from-runs)
    fitted_runs: tuple[str, ...] = field(default=(), metadata=serial.spec(omit=True))
    # a CPU profile from runs: the share of a core its times assume
    core_share: float | None = field(default=None, metadata=serial.spec(omit=True, check=serial.Check(
        lambda v: 0 < v <= 1, "a share of a core in (0, 1]")))
    # a calibrated profile: its error and how it was measured (read from its fit's diagnostics: stated_error)
    stated_error: str | None = field(default=None, metadata=serial.spec(omit=True))
    # torch's device type the profile was measured on (cpu, cuda), as calibrate writes it; None: not stated
    device_type: str | None = field(default=None, metadata=serial.spec(omit=True))

    @property
    def on_cpu(self) -> bool:
        """A profile of a CPU: its ``device_type`` (calibrate writes torch's), else its name as ``flopplan
        calibrate`` names a CPU (``CPU <model> (N threads)``, :func:`flopplan.measure.device.hardware_name`); a GPU's
        name or a datasheet's otherwise."""
        kind = (self.device_type or "").strip().lower()
        return kind == "cpu" if kind else self.device.startswith("CPU ")

    def extrapolation_note(self, params: int) -> str | None:
        """A warning when a calibrated profile prices a model far outside the sizes it was fitted on."""
        if not self.fitted_on:
            return None
        low, high = min(self.fitted_on.values()), max(self.fitted_on.values())
        if low / 4 <= params <= high * 4:
            return None
        return (f"the profile was fitted on {', '.join(self.fitted_on)} ({low:,} to {high:,} parameters): "
                f"times for {params:,} parameters are an extrapolation")

    def flops_per_second(self, kind: str) -> float:
        if kind not in self.efficiency:
            raise UserError(f"profile {self.device!r} has no efficiency for {kind!r} work")
        return self.peak_flops * self.efficiency[kind]

    def seconds(self, kind: str, flops: Any) -> float:
        """Seconds one device spends on ``flops`` (a number, or an array summed) of this kind of work at peak x
        efficiency."""
        return total(flops) / self.flops_per_second(kind)

    def calls_seconds(self, kind: str, calls: list[tuple[float, Call]]) -> float:
        """Seconds for ``count`` repetitions of each call: the time model when the profile has one (calibrated,
        or a datasheet roofline), else the FLOPs at peak x efficiency."""
        if self.time_model is None:
            return sum(count * self.seconds(kind, call.flops) for count, call in calls)
        entry = self.time_model[kind]
        return sum(count * call_seconds(entry["form"], entry, call, self.bytes_per_element)
                   for count, call in calls)

    def non_phase_seconds(self, recipe: Any, steps: int, evaluations: int,
                          checkpoint_every: int | None = DEFAULT_CHECKPOINT_EVERY) -> dict[str, float]:
        """Seconds of a run outside its FLOP phases, by term (:data:`flopplan.timing.NON_PHASE_TERMS`): nothing for
        a profile without such a model (a datasheet, or a sweep that timed phases only)."""
        if not self.non_phase:
            return {}
        out = run_non_phase_seconds(self.non_phase, RunWork.of(recipe), steps, evaluations, checkpoint_every)
        return {term: seconds for term, seconds in out.items() if term in self.non_phase}

    def shape_notes(self, calls: dict[str, list[tuple[float, Call]]], kind_of: dict[str, str]) -> list[str]:
        """A warning per kind of work whose calls (``phase -> (count, call)``) hold more tokens in flight (rows x
        positions; a decode step: its rows) than the largest call the profile was fitted on, by more than
        :data:`SHAPE_SLACK` (smaller calls interpolate towards the per-call overheads the fit pins down)."""
        if not self.fitted_shapes:
            return []
        notes = []
        for kind, fitted in self.fitted_shapes.items():
            tokens = [float(call.tokens) for phase, pairs in calls.items() if kind_of.get(phase) == kind
                      for _, call in pairs]
            if tokens and max(tokens) > fitted["tokens"][1] * SHAPE_SLACK:
                notes.append(f"{kind} calls of {max(tokens):,.0f} tokens in flight are beyond the "
                             f"{fitted['tokens'][1]:,.0f} the profile was fitted on: their times are an extrapolation")
        return notes

    def non_phase_notes(self, recipe: Any) -> list[str]:
        """A note when a profile that models the time outside the phases lacks a term the recipe's run incurs (an
        evaluation no fitted run ran, a start-up no run dated): that time is left out of the plan."""
        if not self.non_phase:
            return []
        incurred = ["round", "optimizer_step", "checkpoint", "startup", "shutdown"]
        incurred += ["evaluation"] if recipe.eval_every is not None else []
        missing = [term.replace("_", " ") for term in incurred if term not in self.non_phase]
        return [f"the profile does not model the time of {', '.join(missing)} outside the phases (no run it was "
                "fitted on showed it): the plan leaves it out"] if missing else []

    def describe(self) -> str:
        price = f", ${self.price_per_hour:g}/h" if self.price_per_hour else ""
        if self.time_model is not None and self.source.startswith("datasheet"):
            decode = self.time_model["decode"]
            effs = ", ".join(f"{k} {100 * v:.0f}%" for k, v in self.efficiency.items() if k != "decode")
            return (f"{self.device} ({self.source}: peak {self.peak_flops / 1e12:.0f} TFLOP/s bf16; {effs}; decode "
                    f"roofline at {decode['bandwidth'] / 1e12:.2f} TB/s effective{price})")
        if self.time_model is not None:
            outside = f"; outside the phases: {', '.join(self.non_phase)}" if self.non_phase else ""
            error = f"; {self.stated_error}" if self.stated_error else ""
            return (f"{self.device} ({self.source}; fitted time model for {', '.join(self.time_model)}{outside}"
                    f"{price}{error})")
        effs = ", ".join(f"{k} {100 * v:.0f}%" for k, v in self.efficiency.items())
        return f"{self.device} ({self.source}: peak {self.peak_flops / 1e12:.0f} TFLOP/s bf16; {effs}{price})"

    def to_data(self) -> dict[str, Any]:
        """The profile as a profile file holds it (it reads back through :func:`profile_from_data`)."""
        return serial.write(PROFILE_LAYOUT, self)


SHAPE_SLACK = 2.0
"""How far beyond the largest fitted call (rows, tokens) a plan's calls may go before the plan says it
extrapolates."""



PROFILE_VERSION = 1  # the layout of a profile JSON (flopplan calibrate writes it, load_profile reads it)
PROFILE_LAYOUT = serial.Layout("profile", "flopplan_profile_version", PROFILE_VERSION, hint="recalibrate",
                               other_keys=True)  # a calibration's diagnostics sit beside the profile


def cpu_model() -> str:
    """The CPU's model name as Linux reports it (``/proc/cpuinfo``), else what ``platform`` knows: the words a
    profile or a recorded measurement names its hardware by."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def datasheet_profile(device: str, engine: str = "hf", price_per_hour: float | None = None) -> Profile:
    """A device from its datasheet: compute-bound kinds at peak x the default efficiency, decode as a roofline
    on the device's memory bandwidth (:data:`DEFAULT_DECODE`)."""
    if price_per_hour is not None and not (math.isfinite(price_per_hour) and price_per_hour > 0):
        raise UserError(f"the price per GPU-hour must be a positive number, not {price_per_hour}")
    key = device.lower().replace("_", "-")
    if key not in DATASHEETS:
        raise UserError(f"unknown device {device!r}: use one of {', '.join(DATASHEETS)} or a profile JSON")
    sheet, efficiency, decode = DATASHEETS[key], DEFAULT_EFFICIENCY[engine], DEFAULT_DECODE[engine]
    time_model: dict[str, dict[str, Any]] = {
        kind: {"form": "saturating", "throughput_max": sheet.peak_flops * efficiency[kind], "tokens_half": 0.0,
               "overhead": 0.0, "overhead_layer": 0.0, "attention_throughput": sheet.peak_flops * efficiency[kind]}
        for kind in ("train", "forward", "prefill")}
    time_model["decode"] = {"form": "roofline", "throughput": sheet.peak_flops * efficiency["decode"],
                            "bandwidth": sheet.bandwidth * decode["bandwidth_efficiency"], "overhead": 0.0,
                            "overhead_layer": decode["overhead_layer"]}
    return Profile(key, sheet.peak_flops, dict(efficiency), price_per_hour,
                   f"datasheet ({sheet.source}), default {engine} efficiencies", time_model, 2.0)


RATE_PARAMETERS = ("throughput_max", "attention_throughput", "throughput", "bandwidth", "adapter_throughput")
MIN_RATE = 1e3
MAX_FITTED_RATE = 1e30
"""A time model's rates come from a fit, and one the runs do not identify (a term whose time is all but nothing on
their shapes) can drift far past any device: a quick CPU calibration wrote an attention throughput of 7.7e18. So
they are bounded by the most FLOPs flopplan plans (1e30) in a second instead of :data:`MAX_RATE`: what a fit writes
is read back, and a typo (1e40) is still refused."""
"""Throughputs (FLOP/s) and bandwidths (bytes/s) below this are not a device: a profile that claims one is
malformed (a tiny rate would only overflow into infinite times)."""
MAX_OVERHEAD = 60.0
"""A fixed cost of more than a minute per call or per layer is not a measurement either."""


def load_profile(path: str | Path, price_per_hour: float | None = None) -> Profile:
    """A profile JSON written by ``flopplan calibrate`` (or by hand: its version, device, peak_flops and an
    efficiency per kind of work, at most 1; optionally a time model for every kind)."""
    return profile_from_data(read_json(path, "profile"), f"profile {str(path)!r}", price_per_hour,
                             f"profile {Path(path).name}")


def profile_from_data(data: Any, where: str, price_per_hour: float | None = None,
                      source: str = "profile") -> Profile:
    """A profile from a file's data (:data:`PROFILE_LAYOUT`); ``price_per_hour`` replaces the file's price,
    ``source`` names a profile that does not name itself."""
    body = serial.upgrade(PROFILE_LAYOUT, data, where)
    odd = [key for key, kind in METADATA.items() if key in body and not isinstance(body[key], kind)]
    if not odd and not all(isinstance(name, str) for name in body.get("models", [])):
        odd = ["models"]
    if not odd and not all(isinstance(fit, dict) for fit in body.get("fit", {}).values()):
        odd = ["fit"]
    if odd:
        what = {"models": "a list of model names", "fit": "an object with a fit per kind of work"}
        raise UserError(f"{where} is malformed: {odd[0]} must be {what.get(odd[0], 'a string')} (as calibrate "
                        f"writes it), not {body[odd[0]]!r:.60}")
    if "efficiency" not in body:
        raise UserError(f"{where} is malformed: needs a positive peak_flops and an efficiency per kind of work")
    body.setdefault("source", source)
    if "stated_error" not in body and (error := stated_error(body)):
        body["stated_error"] = error
    if price_per_hour is not None:
        body["price_per_hour"] = price_per_hour
    profile: Profile = serial.from_data(Profile, body, where, other_keys=True)
    for kind, fit in body.get("fit", {}).items():  # calibrate's time model is its fit's parameters, as fitted
        model = (profile.time_model or {}).get(kind)
        if model is None or any(fit.get(k) != model[k] for k in ("form", *PARAMETERS[model["form"]])):
            raise UserError(f"{where} is malformed: fit.{kind} is not the fit of time_model.{kind}")
    return profile


def stated_error(body: dict[str, Any]) -> str | None:
    """A calibrated profile's error, from its fit's diagnostics, and how it was measured: a sweep's on its
    held-out points, a fit from runs' on each run's calls predicted by a fit on the other runs where it has that
    (else on the calls it was fitted on: in-sample). None where the diagnostics say nothing (a hand-written
    profile); the figures are the phase calls' only (not the time outside the phases)."""
    def medians(errors: Any) -> str | None:
        if not isinstance(errors, dict):
            return None
        values = [(k, float(e["median"])) for k, e in errors.items()
                  if isinstance(e, dict) and is_number(e.get("median"))]
        return ", ".join(f"{k} {100 * v:.0f} %" for k, v in values) or None

    runs = body.get("fit_from_runs")
    if isinstance(runs, dict):
        held, own = medians(runs.get("held_out_errors")), medians(runs.get("unit_errors"))
        if held:
            return f"phase calls' median abs. error held out, each fit run predicted by a fit on the others: {held}"
        if own:
            return f"phase calls' median abs. error in-sample, on the calls it was fitted on (none held out): {own}"
    sweep = body.get("fit")
    if isinstance(sweep, dict):
        held = medians({k: v.get("heldout_error") for k, v in sweep.items() if isinstance(v, dict)})
        if held:
            return f"median abs. error on sweep points held out of the fit: {held}"
    return None


def _efficiency(data: Any, where: str) -> dict[str, float]:
    """An efficiency per kind of work, each a fraction of the peak in (0, 1]."""
    if not isinstance(data, dict):
        raise UserError(f"{where} must be an object with an efficiency per kind of work")
    missing = [k for k in KINDS if k not in data]
    bad = [k for k, v in data.items() if not is_number(v) or not 0 < v <= 1]
    if missing or bad:
        raise UserError(f"{where}: efficiencies are fractions of the peak in (0, 1], one for each of "
                        f"{', '.join(KINDS)}" + (f"; {bad[0]} is {data[bad[0]]!r}" if bad else ""))
    return {k: float(v) for k, v in data.items()}


def _non_phase(data: Any, where: str) -> dict[str, dict[str, float]] | None:
    """The optional non-phase block (profiles of version 1 without it read as before): term -> coefficients, each
    a finite number >= 0 (a coefficient left out is 0)."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise UserError(f"{where} must be an object")
    out = {}
    for term, coefficients in data.items():
        if term not in NON_PHASE_TERMS or not isinstance(coefficients, dict):
            raise UserError(f"{where}.{term} is not a term of the time model (one of "
                            f"{', '.join(NON_PHASE_TERMS)}, each an object of coefficients)")
        for name, value in coefficients.items():
            if name not in NON_PHASE_TERMS[term]:
                raise UserError(f"{where}.{term}.{name} is not a coefficient of {term} (one of "
                                f"{', '.join(NON_PHASE_TERMS[term])})")
            if not is_number(value) or not 0 <= value <= MAX_OVERHEAD or not math.isfinite(value):
                raise UserError(f"{where}.{term}.{name} must be from 0 to {MAX_OVERHEAD:g} seconds per "
                                f"unit, not {value!r}")
        out[term] = {name: float(v) for name, v in coefficients.items()}
    return out


def _fitted_shapes(data: Any, where: str) -> dict[str, dict[str, list[float]]] | None:
    if data is None:
        return None
    ok = isinstance(data, dict) and all(
        kind in KINDS and isinstance(entry, dict) and isinstance(entry.get("tokens"), list)
        and len(entry["tokens"]) == 2 and all(is_number(v) and v >= 0 for v in entry["tokens"])
        for kind, entry in data.items())
    if not ok:
        raise UserError(f"{where} must map kinds of work to {{\"tokens\": [lowest, highest]}}")
    return {kind: {"tokens": [float(v) for v in entry["tokens"]]} for kind, entry in data.items()}


def _time_model(data: Any, where: str) -> dict[str, dict[str, Any]] | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise UserError(f"{where} must be an object")
    for kind, entry in data.items():
        if kind not in KINDS or not isinstance(entry, dict) or entry.get("form") not in FORMS:
            raise UserError(f"{where}.{kind} must have a form ({', '.join(FORMS)})")
    missing = [k for k in KINDS if k not in data]
    if missing:
        raise UserError(f"{where} has no model for {', '.join(missing)} (it needs one for each of "
                        f"{', '.join(KINDS)})")
    out = {}
    for kind, entry in data.items():
        params = {}
        for name in (*PARAMETERS[entry["form"]], *(n for n in OPTIONAL_PARAMETERS if n in entry)):
            value = entry.get(name)
            rate = name in RATE_PARAMETERS
            low, high = (MIN_RATE, MAX_FITTED_RATE) if rate else (0, MAX_TOKENS_HALF if name == "tokens_half" else
                                                            MAX_OVERHEAD)
            if not is_number(value) or not math.isfinite(value) or not low <= value <= high:
                limit = f"at least {MIN_RATE:g} and at most {MAX_FITTED_RATE:g}" if rate else \
                    f"from 0 to {MAX_OVERHEAD:g} seconds" if name != "tokens_half" else \
                    f"from 0 to {MAX_TOKENS_HALF:g} tokens"
                raise UserError(f"{where}.{kind}.{name} must be {limit}, not {value!r}")
            params[name] = float(value)
        out[kind] = {"form": entry["form"], **params}
    return out


def resolve_profile(name_or_path: str, engine: str = "hf", price_per_hour: float | None = None) -> Profile:
    """A device name (datasheet) or a profile JSON file."""
    if name_or_path.lower().replace("_", "-") in PEAK_BF16_FLOPS:
        return datasheet_profile(name_or_path, engine, price_per_hour)
    if Path(name_or_path).exists() or name_or_path.endswith(".json"):
        return load_profile(name_or_path, price_per_hour)
    raise UserError(f"unknown device or profile {name_or_path!r}: use one of {', '.join(PEAK_BF16_FLOPS)} "
                    "or a profile JSON")
