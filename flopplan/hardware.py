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

from flopplan.errors import UserError
from flopplan.fileio import read_json
from flopplan.timing import FORMS, PARAMETERS, Call, call_seconds, total

PEAK_BF16_FLOPS: dict[str, float] = {
    # dense bf16 datasheet peaks (no sparsity), as used by verl and torchtitan
    "h100": 989e12,  # H100 SXM
    "h100-pcie": 756e12,
    "h200": 989e12,
    "a100": 312e12,
    "l40s": 362e12,
    "b200": 2.25e15,
    "mi300x": 1307e12,
}

DEFAULT_EFFICIENCY: dict[str, dict[str, float]] = {
    # fraction of the peak each kind of work reaches, by rollout engine
    "hf": {"train": 0.40, "forward": 0.45, "prefill": 0.45, "decode": 0.02},
    "vllm": {"train": 0.40, "forward": 0.45, "prefill": 0.50, "decode": 0.10},
}
KINDS = ("train", "forward", "prefill", "decode")


@dataclass(frozen=True)
class Profile:
    """How fast each kind of work runs on one device. ``seconds`` is the only interface the planner uses."""

    device: str
    peak_flops: float
    efficiency: dict[str, float] = field(default_factory=dict)  # kind -> fraction of peak
    price_per_hour: float | None = None  # dollars per device-hour
    source: str = "datasheet"
    time_model: dict[str, dict[str, Any]] | None = None  # kind -> {"form": ..., parameters}: calibrated
    bytes_per_element: float = 2.0  # weights and KV cache (bf16), for the decode roofline
    fitted_on: dict[str, int] | None = None  # models (name -> parameters) a calibrated profile was fitted on

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

    def seconds(self, kind: str, flops: float) -> float:
        """Seconds one device spends on ``flops`` of this kind of work (peak x efficiency)."""
        return float(flops) / self.flops_per_second(kind)

    def calls_seconds(self, kind: str, calls: list[tuple[float, Call]]) -> float:
        """Seconds for ``count`` repetitions of each call: the fitted time model when the profile has one,
        else the FLOPs at peak x efficiency."""
        if self.time_model is None or kind not in self.time_model:
            return sum(count * total(self.seconds(kind, call.flops)) for count, call in calls)
        entry = self.time_model[kind]
        return sum(count * call_seconds(entry["form"], entry, call, self.bytes_per_element)
                   for count, call in calls)

    def describe(self) -> str:
        if self.time_model is not None:
            return f"{self.device} ({self.source}; fitted time model for {', '.join(self.time_model)})"
        effs = ", ".join(f"{k} {100 * v:.0f}%" for k, v in self.efficiency.items())
        price = f", ${self.price_per_hour:g}/h" if self.price_per_hour else ""
        return f"{self.device} ({self.source}: peak {self.peak_flops / 1e12:.0f} TFLOP/s bf16; {effs}{price})"

    def to_data(self) -> dict[str, Any]:
        data = {"device": self.device, "peak_flops": self.peak_flops, "efficiency": dict(self.efficiency),
                "price_per_hour": self.price_per_hour, "source": self.source}
        if self.time_model is not None:
            data["time_model"] = self.time_model
            data["bytes_per_element"] = self.bytes_per_element
        return data


PROFILE_VERSION = 1  # the layout of a profile JSON (flopplan calibrate writes it, load_profile reads it)


def datasheet_profile(device: str, engine: str = "hf", price_per_hour: float | None = None) -> Profile:
    if price_per_hour is not None and not (math.isfinite(price_per_hour) and price_per_hour > 0):
        raise UserError(f"the price per GPU-hour must be a positive number, not {price_per_hour}")
    key = device.lower().replace("_", "-")
    if key not in PEAK_BF16_FLOPS:
        raise UserError(f"unknown device {device!r}: use one of {', '.join(PEAK_BF16_FLOPS)} or a profile JSON")
    return Profile(key, PEAK_BF16_FLOPS[key], dict(DEFAULT_EFFICIENCY[engine]), price_per_hour,
                   f"datasheet peak, default {engine} efficiencies")


def load_profile(path: str | Path, price_per_hour: float | None = None) -> Profile:
    """A profile JSON written by ``flopplan calibrate`` (or by hand: device, peak_flops, efficiency)."""
    data = read_json(path, "profile")
    if not isinstance(data, dict):
        raise UserError(f"profile {str(path)!r} must be a JSON object")
    version = data.get("flopplan_profile_version", PROFILE_VERSION)
    if version != PROFILE_VERSION:
        raise UserError(f"profile {str(path)!r} has version {version!r}; this flopplan reads version "
                        f"{PROFILE_VERSION} (recalibrate with this flopplan)")
    if not isinstance(data.get("device"), str) or not data["device"].strip():
        raise UserError(f"profile {str(path)!r}: device must be a non-empty name")
    try:
        device = str(data["device"])
        peak = float(data["peak_flops"])
        efficiency = {str(k): float(v) for k, v in dict(data["efficiency"]).items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"profile {str(path)!r} is malformed: needs device, peak_flops and efficiency ({exc})") \
            from None
    missing = [k for k in KINDS if k not in efficiency]
    values = [peak, *efficiency.values()]
    if missing or not all(math.isfinite(v) and v > 0 for v in values):
        raise UserError(f"profile {str(path)!r}: needs a finite positive peak and finite positive efficiencies "
                        f"for {', '.join(KINDS)}")
    price = price_per_hour if price_per_hour is not None else data.get("price_per_hour")
    if price is not None and (isinstance(price, bool) or not isinstance(price, (int, float))
                              or not math.isfinite(price) or price <= 0):
        raise UserError(f"profile {str(path)!r}: price_per_hour must be a positive number, not {price!r}")
    time_model = _time_model(data.get("time_model"), str(path))
    bytes_per_element = data.get("bytes_per_element", 2.0)
    if isinstance(bytes_per_element, bool) or not isinstance(bytes_per_element, (int, float)) \
            or not (math.isfinite(bytes_per_element) and bytes_per_element > 0):
        raise UserError(f"profile {str(path)!r}: bytes_per_element must be a positive number")
    fitted_on = data.get("model_params")
    if fitted_on is not None and (not isinstance(fitted_on, dict) or not all(
            isinstance(v, int) and v > 0 for v in fitted_on.values())):
        raise UserError(f"profile {str(path)!r}: model_params must map model names to parameter counts")
    return Profile(device, peak, efficiency, price, str(data.get("source", f"profile {Path(path).name}")),
                   time_model, float(bytes_per_element), fitted_on)


def _time_model(data: Any, where: str) -> dict[str, dict[str, Any]] | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise UserError(f"profile {where!r}: time_model must be an object")
    out = {}
    for kind, entry in data.items():
        if kind not in KINDS or not isinstance(entry, dict) or entry.get("form") not in FORMS:
            raise UserError(f"profile {where!r}: time_model.{kind} must have a form ({', '.join(FORMS)})")
        params = {}
        for name in PARAMETERS[entry["form"]]:
            value = entry.get(name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0 or (value == 0 and name != "overhead" and name != "tokens_half"):
                raise UserError(f"profile {where!r}: time_model.{kind}.{name} must be a positive number")
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
