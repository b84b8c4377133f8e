"""The calibration report (Markdown + a PNG): counters side by side, the fitted time model, held-out errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flopplan.fileio import atomic_savefig, atomic_write_text
from flopplan.report.tables import Table, to_markdown
from flopplan.timing import Call, call_seconds
from flopplan.units import eng

BLIND_SPOTS = {
    "flop_counter": "FlopCounterMode counts registered ops only (mm/addmm/bmm, SDPA flash/efficient/cudnn and their "
                    "backward); the CPU SDPA kernel is not registered, so attention counts 0 under SDPA on CPU. "
                    "Exact with eager attention.",
    "profiler": "torch.profiler(with_flops) adds elementwise ops (add, mul) at one FLOP per element, so its total "
                "over-counts the matmul convention; it has no formula for SDPA, so attention is missing under SDPA. "
                "With eager attention its matmul-only sum equals the closed form on forward passes and generate; "
                "on the update it counts slightly more (see the table).",
    "fvcore": "fvcore counts multiply-adds (doubled here) of a jit-traced forward: no backward (n/a for the update), "
              "no way to trace generate with its KV cache (n/a for rollouts), and no handle for "
              "scaled_dot_product_attention, which it drops with a warning (attention missing under SDPA).",
}


HELDOUT_TARGET = 0.15  # the calibration's goal for the median held-out error of each kind of work


def _err(value: int | None, exact: int) -> str:
    if value is None:
        return "n/a"
    if value == exact:
        return f"{value:,} (exact)"
    return f"{value:,} ({100 * (value / exact - 1):+.2f}%)"


def counters_table(rows: list[dict[str, Any]]) -> Table:
    table = Table("Counters side by side (one GRPO step of a small policy; relative error against the closed form)",
                  ["attention", "phase", "closed form", "FlopCounterMode", "profiler (all ops)",
                   "profiler (matmuls)", "fvcore (MACs x2)"], align="llrrrrr")
    for r in rows:
        exact = r["closed_form"]
        table.rows.append([r["attention"], r["phase"], f"{exact:,}", _err(r["flop_counter"], exact),
                           _err(r["profiler_all_ops"], exact), _err(r["profiler_matmul"], exact),
                           _err(r["fvcore"], exact)])
    return table


def verify_table(rows: list[dict[str, Any]]) -> Table:
    table = Table("Closed form vs FlopCounterMode, every registry size (meta device; tiny-moe on the CPU)",
                  ["model", "phase", "closed form", "FlopCounterMode", "exact"], align="llrrl")
    for r in rows:
        table.rows.append([r["model"], r["phase"], f"{r['closed_form']:,}", f"{r['flop_counter']:,}",
                           "yes" if r["exact"] else "NO"])
    return table


def fit_table(fits: dict[str, dict[str, Any]]) -> Table:
    table = Table("Time model per kind of work (fitted on a random ~75 % of the sweep; error on the points held "
                  f"out; target: median within {100 * HELDOUT_TARGET:.0f} %)",
                  ["kind", "form", "parameters", "points (fit/held out)", "held-out abs. error: median",
                   "mean", "max", "target"], align="llllrrrl")
    for kind, f in fits.items():
        params = parameters_text(f)
        e = f["heldout_error"]
        table.rows.append([kind, f["form"], params, f"{f['fit_points']}/{f['heldout_points']}",
                           f"{100 * e['median']:.1f}%", f"{100 * e['mean']:.1f}%", f"{100 * e['max']:.1f}%",
                           "met" if e["median"] <= HELDOUT_TARGET else "MISSED"])
    return table


def parameters_text(f: dict[str, Any]) -> str:
    """A kind's fitted time model in words."""
    adapters = f", LoRA adapters {eng(f['adapter_throughput'], 'FLOP/s')}" if "adapter_throughput" in f else ""
    if "adapter_token_layer" in f:
        adapters += f", LoRA work {1e6 * f['adapter_token_layer']:.3g} us/token/layer"
    if f["form"] == "saturating":
        return (f"throughput {eng(f['throughput_max'], 'FLOP/s')}, half at {f['tokens_half']:.3g} tokens, "
                f"attention {eng(f['attention_throughput'], 'FLOP/s')}{adapters}, overhead {1e3 * f['overhead']:.3g} "
                f"ms + {1e3 * f['overhead_layer']:.3g} ms/layer")
    return (f"compute {eng(f['throughput'], 'FLOP/s')}, bandwidth {eng(f['bandwidth'], 'B/s')}{adapters}, "
            f"overhead {1e3 * f['overhead']:.3g} ms + {1e3 * f['overhead_layer']:.3g} ms/layer")


def measurement_table(profile: dict[str, Any]) -> Table:
    fits, bpe = profile["time_model"], profile["bytes_per_element"]
    table = Table("Sweep: measured vs predicted (median of repeats; * = held out)",
                  ["model", "kind", "batch", "prompt", "completion", "FLOPs", "measured ms", "predicted ms", "error"],
                  align="llrrrrrrr")
    for m in profile["measurements"]:
        kind = m["kind"]
        if kind not in fits:
            continue
        call = Call(m["flops"], m["tokens"], m["weight_elements"], m["kv_elements"], m["layers"],
                    m["attention_flops"])
        predicted = call_seconds(fits[kind]["form"], fits[kind], call, bpe)
        table.rows.append([m["model"], kind + ("*" if m["heldout"] else ""), str(m["batch"]), str(m["prompt"]),
                           str(m["completion"]), eng(m["flops"]), f"{1e3 * m['seconds']:.2f}",
                           f"{1e3 * predicted:.2f}", f"{100 * (predicted / m['seconds'] - 1):+.1f}%"])
    return table


def plot_fit(profile: dict[str, Any], path: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fits, bpe = profile["time_model"], profile["bytes_per_element"]
    kinds = [k for k in ("train", "forward", "prefill", "decode") if k in fits]
    fig, axes = plt.subplots(1, len(kinds), figsize=(4 * len(kinds), 3.8), squeeze=False)
    for ax, kind in zip(axes[0], kinds, strict=True):
        ms = [m for m in profile["measurements"] if m["kind"] == kind]
        for held, marker, label in ((False, "o", "fit"), (True, "x", "held out")):
            group = [m for m in ms if m["heldout"] == held]
            measured = [1e3 * m["seconds"] for m in group]
            predicted = [1e3 * call_seconds(fits[kind]["form"], fits[kind], Call(
                m["flops"], m["tokens"], m["weight_elements"], m["kv_elements"], m["layers"], m["attention_flops"]),
                bpe) for m in group]
            ax.scatter(measured, predicted, marker=marker, label=label)
        values = [1e3 * m["seconds"] for m in ms]
        lo, hi = min(values) * 0.7, max(values) * 1.4
        ax.plot([lo, hi], [lo, hi], "--", color="grey")
        ax.plot([lo, hi], [lo * 1.15, hi * 1.15], ":", color="grey")
        ax.plot([lo, hi], [lo / 1.15, hi / 1.15], ":", color="grey")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured ms")
        ax.set_ylabel("predicted ms")
        ax.set_title(f"{kind} ({fits[kind]['form']})")
        ax.legend(fontsize=8)
    fig.suptitle(f"{profile['device']}: measured vs predicted (dotted: +-15%)", fontsize=10)
    fig.tight_layout()
    try:
        atomic_savefig(fig, path)
    finally:
        plt.close(fig)
    return str(path)


def write_report(out_dir: Path, profile: dict[str, Any], counters: list[dict[str, Any]] | None,
                 verify_rows: list[dict[str, Any]] | None, command: str) -> Path:
    plot = plot_fit(profile, out_dir / "measured_vs_predicted.png")
    lines = [f"# Calibration: {profile['device']}", "",
             f"- dtype {profile['dtype']}, attention {profile['attn_implementation']}, torch {profile['torch']}, "
             f"transformers {profile['transformers']}, flopplan {profile['flopplan_version']}, {profile['date']}",
             f"- models swept: {', '.join(profile['models'])} ({profile['sweep']} sweep)",
             f"- profile: `profile.json` (use it: `flopplan plan --profile {out_dir}/profile.json --budget 1e17`)",
             ""]
    tables = []
    if counters:
        tables.append(counters_table(counters))
    if verify_rows:
        tables.append(verify_table(verify_rows))
    tables += [fit_table(profile["fit"]), measurement_table(profile)]
    body = to_markdown(tables, command)
    text = "\n".join(lines) + body
    if counters:
        text += "\n## Blind spots\n\n" + "\n".join(f"- **{name}**: {note}" for name, note in BLIND_SPOTS.items())
        text += "\n"
    if plot:
        text += f"\n![measured vs predicted]({Path(plot).name})\n"
    path = out_dir / "report.md"
    atomic_write_text(path, text)
    return path


# -- a profile learned from runs (flopplan calibrate --from-runs) ------------------------------------------------

def runs_table(runs: list[dict[str, Any]]) -> Table:
    table = Table("Runs fitted on (steps: committed steps timed as rounds)",
                  ["run", "model", "engine", "tuning", "reward", "prompts x G", "micro-batch", "mu", "steps",
                   "phase calls"], align="llllllrrrr")
    for r in runs:
        table.rows.append([r["name"], r["model"], r["engine"], r["tuning"], r["reward"],
                           f"{r['prompts_per_step']} x {r['group_size']}", str(r["micro_batch"]), str(r["iterations"]),
                           str(r["rounds"]), str(r["units"])])
    return table


def _errors(errors: dict[str, dict[str, float]]) -> str:
    return ", ".join(f"{unit} {100 * e['median']:.1f} % (max {100 * e['max']:.0f} %, {e['units']} calls)"
                     for unit, e in errors.items())


def run_phase_table(time_model: dict[str, dict[str, Any]], fitted: list[str],
                    unit_errors: dict[str, dict[str, float]], source: str = "the runs' phase calls",
                    held_out: dict[str, dict[str, float]] | None = None,
                    identified: dict[str, dict[str, str]] | None = None) -> Table:
    """The fitted phase models, titled with their errors: ``held_out`` (each run predicted by a fit on the other
    runs) where there is one, and the in-sample ``unit_errors`` (the calls the model was fitted on)."""
    errors = f"in-sample median abs. error per unit, on the calls it was fitted on: {_errors(unit_errors)}"
    if held_out:
        runs = next(iter(held_out.values()))["runs"]
        errors = (f"held-out median abs. error per unit, each of the {runs:.0f} runs predicted by a fit on the "
                  f"others: {_errors(held_out)}; {errors}")
    table = Table(f"Time model per kind of work, fitted on {source} ({errors})",
                  ["kind", "form", "parameters", "from"], align="llll")
    for kind, f in time_model.items():
        source = "fitted" if kind in fitted else "base / kin"
        loose = [f"{p} {why}" for p, why in (identified or {}).get(kind, {}).items() if why != "identified"]
        if kind in fitted and identified is not None:
            source = "fitted; not identified by the runs: " + ", ".join(loose) if loose else "fitted, all identified"
        table.rows.append([kind, f["form"], parameters_text(f), source])
    return table


def non_phase_table(coefficients: dict[str, dict[str, float]], fitted: list[str]) -> Table:
    from flopplan.timing import NON_PHASE_TERMS

    table = Table("Time outside the FLOP phases: seconds = sum(coefficient x feature)",
                  ["term", "coefficient", "value", "from", "stands for"], align="llrll")
    for term, values in coefficients.items():
        for name, meaning in NON_PHASE_TERMS[term].items():
            value = values.get(name, 0.0)
            shown = f"{1e3 * value:.3g} ms" if name == "seconds" else f"{value:.3g} s"
            table.rows.append([term, name, shown, "fitted" if f"{term}.{name}" in fitted else "kept",
                               meaning])
    return table


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:+.1f}%" if whole else "-"


def breakdown_table(rows: list[dict[str, Any]]) -> Table:
    table = Table("Where each run's time went (timed steps; start-up apart): wall = phases (measured) + outside "
                  "the phases (modelled) + remainder; times at the runs' typical share of a core (core: the run's "
                  "own over its timed steps, start-up apart: CPU seconds per thread over wall seconds)",
                  ["run", "core", "steps", "wall s", "phases s", "phases predicted s", "outside modelled s",
                   "remainder s", "start-up s", "start-up modelled s"], align="lrrrrrrrrr")
    for r in rows:
        wall = r["wall_seconds"]
        start = r["startup_seconds"]
        phase, predicted = r["phase_seconds"], r["phase_predicted_seconds"]
        share = r.get("core_share")
        table.rows.append([r["run"], "-" if share is None else f"{share:.2f}", str(r["steps"]), f"{wall:.2f}",
                           f"{phase:.2f}",
                           f"{predicted:.2f} ({_pct(predicted - phase, phase)})",
                           f"{r['outside_modelled_seconds']:.2f}",
                           f"{r['remainder_seconds']:.2f} ({_pct(r['remainder_seconds'], wall)} of wall)",
                           "-" if start is None else f"{start:.2f}",
                           "-" if start is None else f"{r['startup_modelled_seconds']:.2f}"])
    return table


def write_runs_report(out_dir: Path, profile: dict[str, Any], command: str) -> Path:
    fit = profile["fit_from_runs"]
    lines = [f"# Calibration from runs: {profile['device']}", "",
             f"- {profile['source']}; flopplan {profile['flopplan_version']}, {profile['date']}",
             f"- base profile: {fit['base_profile'] or 'none (seeded from the data)'}",
             f"- profile: `profile.json` (use it: `flopplan plan --profile {out_dir}/profile.json --gpu-hours 1`)",
             ""]
    tables = [runs_table(fit["runs"]), run_phase_table(profile["time_model"], fit["fitted_kinds"],
                                                       fit["unit_errors"], held_out=fit.get("held_out_errors"),
                                                       identified=fit.get("identified")),
              non_phase_table(profile["non_phase"], fit["fitted_coefficients"]), breakdown_table(fit["breakdown"])]
    text = "\n".join(lines) + to_markdown(tables, command)
    if fit["notes"]:
        text += "\n## Notes\n\n" + "\n".join(f"- {n}" for n in fit["notes"]) + "\n"
    path = out_dir / "report.md"
    atomic_write_text(path, text)
    return path
