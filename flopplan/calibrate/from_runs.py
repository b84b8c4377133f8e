"""``flopplan calibrate --from-runs``: a profile learned from real runs, and what it explains of them (torch-free).

Reads the run folders (:mod:`flopplan.calibrate.runs`; runs measured with the FLOP meter are skipped), fits the
time model of every kind of work on their phase calls and the time outside the phases on their steps
(:mod:`flopplan.calibrate.fit_runs`), and writes ``profile.json`` (a version-1 profile with the optional
``non_phase``, ``fitted_shapes`` and ``fitted_runs`` blocks) and ``report.md``, which splits each run's wall time
into its phase time, the time outside the phases the profile now models, and the remainder it cannot explain.
"""

from __future__ import annotations

import datetime
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flopplan import __version__
from flopplan.calibrate.fit import KIND_FORM, simple_rates
from flopplan.calibrate.fit_runs import (
    NonPhaseFit,
    PhaseFit,
    fit_non_phase,
    fit_phases,
    outside_seconds,
    own_work,
    startup_seconds,
)
from flopplan.calibrate.runs import RunTiming, at_typical_share, read_runs
from flopplan.errors import UserError
from flopplan.fileio import atomic_write_json, path_kind, writable_folder
from flopplan.hardware import PROFILE_VERSION, Profile, load_profile, profile_from_data
from flopplan.timing import OPTIONAL_PARAMETERS, PARAMETERS

SHUTDOWN_REPEATS = 3
"""Child processes --probe-shutdown times (their median: one exit on a busy machine can take twice another)."""


def bytes_per_element(dtype: str) -> float:
    """Bytes per weight and KV-cache element a run's decode reads: 2 for bf16/fp16 weights, else 4 (fp32, and
    float32 weights under bf16 autocast)."""
    return 2.0 if dtype.startswith(("bfloat16", "float16")) else 4.0


@dataclass
class RunsCalibration:
    profile: dict[str, Any]
    folder: Path
    profile_path: Path
    report_path: Path
    notes: list[str]


def breakdown(run: RunTiming, phases: PhaseFit, non_phase: NonPhaseFit) -> dict[str, Any]:
    """One run's timed steps split into the phase time (measured, and as the fitted model predicts it), the time
    outside the phases as the profile models it, and the remainder; and its start-up, measured and modelled (times
    at the runs' typical share of a core, when the runs record theirs)."""
    c = non_phase.coefficients
    wall = sum(r.wall_seconds for r in run.rounds)
    phase = sum(r.phase_seconds for r in run.rounds)
    outside = sum(outside_seconds(r, c) for r in run.rounds)
    startup = [s.seconds - own_work(s.first, c) for s in run.startups]
    return {"run": run.name, "model": run.model, "engine": run.engine, "steps": len(run.rounds),
            "core_share": run.core_share,
            "wall_seconds": wall, "phase_seconds": phase,
            "phase_predicted_seconds": sum(phases.predicted.get((run.name, r.step), 0.0) for r in run.rounds),
            "outside_modelled_seconds": outside, "remainder_seconds": wall - phase - outside,
            "startup_seconds": sum(startup) if startup else None,
            "startup_modelled_seconds": sum(startup_seconds(c, s.features) for s in run.startups) if startup
            else None}


def fit_from_runs(folders: list[str], base: Profile | None = None,
                  shutdown: float | None = None) -> tuple[dict[str, Any], list[str]]:
    """The profile data fitted on ``folders`` (``base``: a starting point, and the model of whatever the runs do not
    determine; ``shutdown``: a process's exit as :mod:`flopplan.calibrate.probe` timed it), and the notes of the
    fit."""
    runs, notes = read_runs(folders)
    if not runs:
        raise UserError("no run to fit on: " + "; ".join(notes))
    devices = sorted({r.device for r in runs})
    if len(devices) > 1:
        raise UserError(f"the runs ran on different devices ({', '.join(devices)}): fit one profile per device")
    machines = sorted({r.hardware for r in runs if r.hardware})
    if len(machines) > 1:
        raise UserError(f"the runs ran on different machines ({'; '.join(machines)}): fit one profile per machine "
                        "(a CPU's threads are part of it)")
    engines = sorted({r.engine for r in runs})
    if len(engines) > 1:
        notes.append(f"the runs ran in different loops ({', '.join(engines)}): their calls are fitted as one time "
                     "model, which holds where the loops run the same kernels (fit one profile per loop to compare)")
    unknown = [r.name for r in runs if not r.hardware]
    if unknown and len(runs) > 1:
        notes.append(f"{', '.join(unknown)}: {'their folders do' if len(unknown) > 1 else 'its folder does'} not "
                     "record the machine (older runs): that every run ran on one machine is taken, not checked")
    sizes = sorted({bytes_per_element(r.dtype) for r in runs})
    if len(sizes) > 1:
        raise UserError(f"the runs used different dtypes ({', '.join(sorted({r.dtype for r in runs}))}): fit one "
                        "profile per dtype")
    bpe = sizes[0]
    shares = {r.name: r.core_share for r in runs}
    starts = {r.name: [s.core_share for s in r.startups] for r in runs if r.startups}
    runs, typical = at_typical_share(runs)
    if typical is not None:
        notes.append(share_note(typical, shares, starts))
    phases = fit_phases([u for r in runs for u in r.units], bpe, base.time_model if base else None)
    non_phase = fit_non_phase(runs, base.non_phase if base else None)
    notes += phases.notes + non_phase.notes
    notes.append(phase_error_note(phases.unit_errors, phases.held_out_errors))
    notes += identification_notes(phases.identified, phases.tokens)
    if shutdown is not None:
        non_phase.coefficients["shutdown"] = {"seconds": shutdown}
        non_phase.fitted.append("shutdown.seconds")
        notes.append(f"shutdown: a run-like process took {shutdown:.2f} s to exit after its last statement (probed "
                     f"here, median of {SHUTDOWN_REPEATS})")
    elif "shutdown" not in non_phase.coefficients:
        notes.append("the process's exit after its last file is not modelled (--probe-shutdown times it)")
    peak, efficiency = simple_rates(phases.time_model)  # (fitted rates, at most what a profile can state)
    rows = [breakdown(r, phases, non_phase) for r in runs]
    today = datetime.date.today().isoformat()
    data: dict[str, Any] = {
        "flopplan_profile_version": PROFILE_VERSION,
        "device": base.device if base else f"{machines[0] if len(machines) == 1 else devices[0]} ({runs[0].dtype})",
        "device_type": devices[0].split(":")[0],
        "dtype": runs[0].dtype,
        "bytes_per_element": bpe,
        "flopplan_version": __version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "source": f"fitted on {len(runs)} run{'s' if len(runs) > 1 else ''} {today}",
        "models": sorted({r.model for r in runs}),
        "model_params": {r.recipe.policy: r.recipe.policy_spec.params for r in runs},
        "peak_flops": peak,
        "efficiency": efficiency,
        "time_model": {k: {"form": m["form"], **{p: m[p] for p in (*PARAMETERS[m["form"]], *OPTIONAL_PARAMETERS)
                                                 if p in m}} for k, m in phases.time_model.items()},
        "non_phase": non_phase.coefficients,
        "fitted_shapes": {k: {"tokens": v} for k, v in phases.tokens.items()},
        "fitted_runs": [r.name for r in runs],
        **({"core_share": min(typical, 1.0)} if typical is not None else {}),
        "fit_from_runs": {
            "runs": [r.describe() for r in runs],
            "base_profile": base.source if base else None,
            "fitted_kinds": phases.fitted_kinds,
            "unit_errors": phases.unit_errors,
            "held_out_errors": phases.held_out_errors,
            "identified": phases.identified,
            "fitted_coefficients": non_phase.fitted,
            "core_share": {"typical": typical, "runs": shares, "startups": starts},
            "breakdown": rows,
            "notes": notes,
        },
    }
    missing = [k for k in KIND_FORM if k not in data["time_model"]]
    if missing:
        raise UserError(f"the runs hold no {', '.join(missing)} call to fit on and no base profile gives one: "
                        "add --profile BASE (e.g. a sweep's profile)")
    return data, notes


def identification_notes(identified: dict[str, dict[str, str]], tokens: dict[str, list[float]]) -> list[str]:
    """A warning per kind whose calls all had one shape (its saturation and overheads cannot be told from its
    throughput), and one naming the parameters the runs did not identify (they stay near their starting values:
    the base profile's, or the seed's)."""
    notes = [f"{kind}: every call fitted on had {lo:,.0f} tokens in flight (one shape): its saturation and "
             "overheads cannot be told from its throughput; fit on runs of several shapes"
             for kind, (lo, hi) in tokens.items() if lo == hi]
    loose = [f"{kind} {name} ({why})" for kind, names in identified.items() for name, why in names.items()
             if why != "identified"]
    if loose:
        notes.append("phase-model parameters the runs do not identify (kept near their starting values, the base "
                     "profile's or the seed's; see 'from' in the report): " + ", ".join(loose))
    return notes


def phase_error_note(in_sample: dict[str, dict[str, float]],
                     held_out: dict[str, dict[str, float]] | None) -> str:
    """How far the fitted phase models are from the runs' calls, saying on which calls that was measured."""
    def text(errors: dict[str, dict[str, float]]) -> str:
        return ", ".join(f"{u} {100 * e['median']:.1f} % (max {100 * e['max']:.0f} %, {e['units']} calls)"
                         for u, e in errors.items())

    own = f"in-sample (on the calls it was fitted on): {text(in_sample)}"
    if not held_out:
        return (f"phase calls' median abs. error {own}; one run: nothing held out, so this understates the error "
                "on another run (fit on several runs for a held-out figure)")
    runs = next(iter(held_out.values()))["runs"]
    return (f"phase calls' median abs. error held out (each of the {runs:.0f} runs' calls predicted by a fit on the "
            f"other runs): {text(held_out)}; {own}")


def share_note(typical: float, shares: dict[str, float | None], starts: dict[str, list[float | None]]) -> str:
    """What the share every fitted time was put at is, and how each part of it was measured."""
    known = [v for v in shares.values() if v is not None]
    started = [v for values in starts.values() for v in values if v is not None]
    startups = (f"; each start-up's, its process's CPU seconds over its start to its first line: {min(started):.2f} "
                f"to {max(started):.2f}" if started else "")
    return (f"every time (phase calls, steps and start-ups) put at the runs' typical share of a core, {typical:.2f}, "
            "the one share plans assume: the median of each run's timed steps' share (CPU seconds per thread over "
            f"wall seconds, start-up apart: {min(known):.2f} to {max(known):.2f}{startups}); other processes on the "
            "machine slow a run down, which must not pass for slower work")


def run_from_runs(folders: list[str], *, out_dir: str | None, base_path: str | None, command: str,
                  probe_shutdown: bool = False, shutdown_repeats: int | None = None) -> RunsCalibration:
    """Fit on ``folders`` and write ``profile.json`` and ``report.md`` in ``out_dir`` (default
    ``calibration/<device>-runs``); ``probe_shutdown``: also time a run-like process's exit here (the median of
    ``shutdown_repeats`` child processes, default :data:`SHUTDOWN_REPEATS`)."""

    for run in folders:
        kind = path_kind(run, "run folder ")
        if kind not in (None, "folder"):
            raise UserError(f"run folder {run!r} is not a folder (a file: give the run's folder)")
        if kind is None:
            raise UserError(f"run folder {run!r} does not exist")
    base = load_profile(base_path) if base_path else None
    made = out_dir is not None and path_kind(out_dir, "calibration folder ") is None
    if out_dir:
        writable_folder(out_dir, "calibration folder")
    try:
        return _fit_and_write(folders, out_dir, base, command, probe_shutdown, shutdown_repeats)
    except UserError:
        if made and out_dir is not None and Path(out_dir).is_dir() and not any(Path(out_dir).iterdir()):
            Path(out_dir).rmdir()  # a refused fit leaves no empty folder it made (its writability checked first)
        raise


def _fit_and_write(folders: list[str], out_dir: str | None, base: Any, command: str, probe_shutdown: bool,
                   shutdown_repeats: int | None) -> RunsCalibration:
    from flopplan.report.calibration_report import write_runs_report

    shutdown = None
    if probe_shutdown:
        from flopplan.calibrate.probe import shutdown_seconds

        try:
            shutdown = shutdown_seconds(shutdown_repeats or SHUTDOWN_REPEATS)
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            raise UserError(f"--probe-shutdown could not run a run-like process here: {exc}") from None
    data, notes = fit_from_runs(folders, base, shutdown)
    folder = Path(out_dir) if out_dir else default_folder(data["device"])
    writable_folder(folder, "calibration folder")
    profile_from_data(data, "the fitted profile")  # the strict reader accepts it before it is written
    profile_path = atomic_write_json(folder / "profile.json", data)
    report_path = write_runs_report(folder, data, command)
    return RunsCalibration(data, folder, profile_path, report_path, notes)


def default_folder(device: str) -> Path:
    import re

    return Path("calibration") / (re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")[:48] + "-runs")


