"""The calibration as one call: check the device and the models, compare the counters, sweep, fit, write the
profile and its report. The CLI parses and renders; RACE and scripts can call :func:`run_calibration` directly."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from flopplan import __version__
from flopplan.calibrate.fit import Measurement, fit, holdout_indices, simple_rates
from flopplan.calibrate.specs import spec_named, sweepable
from flopplan.fileio import atomic_write_json, writable_folder
from flopplan.hardware import PROFILE_VERSION
from flopplan.measure.device import DevicePolicy, hardware_name
from flopplan.measure.models import check_memory
from flopplan.timing import PARAMETERS

QUICK_CPU_MODELS = ("tiny", "cal-small")
CPU_MODELS = ("qwen2.5-0.5b",)
GPU_MODELS = ("qwen2.5-0.5b", "qwen2.5-1.5b")


def default_models(policy: DevicePolicy, quick: bool) -> list[str]:
    """What the sweep times when no model is named: tiny configs for a quick CPU run, 0.5B on a CPU, 0.5B and
    1.5B on a GPU."""
    if policy.on_gpu:
        return list(GPU_MODELS)
    return list(QUICK_CPU_MODELS if quick else CPU_MODELS)


def profile_folder(device: str, quick: bool) -> Path:
    """``calibration/<device slug>[-quick]``: where a profile goes when no folder is named."""
    text = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")[:48]
    return Path("calibration") / f"{text}{'-quick' if quick else ''}"


def profile_data(policy: DevicePolicy, models: list[str], fits: dict[str, dict[str, Any]],
                 measurements: list[Measurement], quick: bool,
                 counters: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    import transformers

    device = policy.device
    observed: dict[str, float] = {}
    for m in measurements:
        observed[m.kind] = max(observed.get(m.kind, 0.0), m.flops / m.seconds if m.seconds > 0 else 0.0)
    peak, efficiency = simple_rates(fits, observed)
    time_model = {k: {"form": f["form"], **{p: f[p] for p in PARAMETERS[f["form"]]}} for k, f in fits.items()}
    held = holdout_indices(measurements)
    return {
        "flopplan_profile_version": PROFILE_VERSION,
        "device": hardware_name(device),
        "device_type": device.type,
        "dtype": policy.dtype_name,
        "attn_implementation": policy.attention,
        "bytes_per_element": policy.bytes_per_element,
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
        "efficiency": efficiency,
        "time_model": time_model,
        "fit": fits,
        "measurements": [{**asdict(m), "heldout": i in held} for i, m in enumerate(measurements)],
        "counters": counters,
    }


@dataclass
class Calibration:
    folder: Path
    profile_path: Path
    report_path: Path
    fits: dict[str, dict[str, Any]]
    counters: list[dict[str, Any]] | None


def check_request(policy: DevicePolicy, models: list[str], out_dir: str | None) -> None:
    """Everything that can be refused before an hour of sweeping: unusable models, weights beyond memory, an
    unwritable folder."""
    for name in models:
        sweepable(name)
        check_memory(spec_named(name), policy.device, policy.dtype)
    if out_dir:
        writable_folder(out_dir, "calibration folder")


def run_calibration(policy: DevicePolicy, models: list[str], *, quick: bool, repeats: int, counters: bool,
                    out_dir: str | None, command: str, progress: Callable[[str, int, int | None], None]
                    = lambda *_: None) -> Calibration:
    """Counters side by side (unless ``counters`` is False), the sweep, the fit, ``profile.json`` and
    ``report.md`` in ``out_dir`` (default ``calibration/<device>``)."""
    from flopplan.calibrate.counters import compare_counters
    from flopplan.calibrate.sweep import sweep
    from flopplan.report.calibration_report import write_report

    check_request(policy, models, out_dir)
    counter_rows = None
    if counters:
        progress("counters side by side", 0, None)
        counter_rows = compare_counters(spec_named(models[0]), policy.device, policy.dtype, ("eager", "sdpa"))
    measurements = sweep(models, policy.device, quick, repeats, lambda label, done, total: progress(
        f"sweep {label}", done, total))
    fits = fit(measurements, policy.bytes_per_element)
    profile = profile_data(policy, models, fits, measurements, quick, counter_rows)
    folder = Path(out_dir) if out_dir else profile_folder(profile["device"], quick)
    writable_folder(folder, "calibration folder")
    profile_path = atomic_write_json(folder / "profile.json", profile)
    report_path = write_report(folder, profile, counter_rows, None, command)
    return Calibration(folder, profile_path, report_path, fits, counter_rows)
