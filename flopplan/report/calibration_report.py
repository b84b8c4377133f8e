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
    table = Table("Closed form vs FlopCounterMode on the meta device, every registry size",
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
        if f["form"] == "saturating":
            params = (f"throughput {eng(f['throughput_max'], 'FLOP/s')}, half at {f['tokens_half']:.3g} tokens, "
                      f"attention {eng(f['attention_throughput'], 'FLOP/s')}, overhead {1e3 * f['overhead']:.3g} ms "
                      f"+ {1e3 * f['overhead_layer']:.3g} ms/layer")
        else:
            params = (f"compute {eng(f['throughput'], 'FLOP/s')}, bandwidth {eng(f['bandwidth'], 'B/s')}, "
                      f"overhead {1e3 * f['overhead']:.3g} ms + {1e3 * f['overhead_layer']:.3g} ms/layer")
        e = f["heldout_error"]
        table.rows.append([kind, f["form"], params, f"{f['fit_points']}/{f['heldout_points']}",
                           f"{100 * e['median']:.1f}%", f"{100 * e['mean']:.1f}%", f"{100 * e['max']:.1f}%",
                           "met" if e["median"] <= HELDOUT_TARGET else "MISSED"])
    return table


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
