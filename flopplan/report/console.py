"""Tables for humans on a terminal (rich), and the JSON/Markdown/LaTeX/CSV forms of the same tables."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

from flopplan.breakdown import component
from flopplan.report.tables import Table, provenance, to_latex, to_markdown
from flopplan.units import count, eng, percent

FORMATS = ("table", "json", "csv", "markdown", "latex")


def console(width: int | None = None) -> Any:
    """A rich console ``width`` characters wide; without one, the terminal's, or 180 when output goes to a file or a
    pipe."""
    from rich.console import Console

    return Console(highlight=False, width=width or (None if sys.stdout.isatty() else 180))


def print_tables(tables: list[Table], notes: list[str] | None = None, width: int | None = None) -> None:
    """``tables`` and the ``notes`` under them on the :func:`console` (``width``: its width). A table wider than the
    console wraps its cells, breaking a value without spaces (an arm name) across lines: no value is cut short."""
    from rich.table import Table as RichTable

    con = console(width)
    for table in tables:
        rich = RichTable(title=table.title, title_justify="left")
        for name, align in zip(table.columns, table.alignment(), strict=True):
            rich.add_column(name, justify="right" if align == "r" else "left", overflow="fold")
        for i, row in enumerate(table.rows):
            if i in table.sections:
                rich.add_section()
            rich.add_row(*row)
        con.print(rich)
    for note in notes or []:
        con.print(f"- {note}")


def render(tables: list[Table], fmt: str, notes: list[str], command: str, csv: str = "") -> str | None:
    """The text of ``tables`` in ``fmt`` (markdown, latex, csv), or None for ``table`` (printed with rich). In
    Markdown and LaTeX the ``notes`` (the recipe, what is left over) go under the last table, as the terminal prints
    them: a table cited from a paper states its recipe."""
    if fmt in ("markdown", "latex") and notes and tables:
        tables = [*tables[:-1], replace(tables[-1], notes=[*tables[-1].notes, *notes])]
    if fmt == "markdown":
        return to_markdown(tables, command)
    if fmt == "latex":
        return to_latex(tables, command)
    if fmt == "csv":
        return csv
    print_tables(tables, notes)
    return None


def models_table(rows: list[dict[str, Any]], context: int) -> Table:
    table = Table(f"Registry (forward FLOPs per token: one sequence of {context} tokens, logits everywhere, "
                  "dense attention, windows masked)", ["model", "params", "active", "non-emb", "L", "window", "h",
                                                       "q/kv heads", "vocab", "head", "fwd/token"])
    table.align = "lrrrrrrrrlr"
    for row in rows:
        window = "" if row["sliding_window"] is None else f"{row['sliding_window']:,}" + (
            "" if row["sliding_layers"] == row["layers"] else f" ({row['sliding_layers']}/{row['layers']})")
        table.rows.append([row["name"], count(row["params"]), count(row["params_active"]) if row["moe"] else "",
                           count(row["params_non_embedding"]), str(row["layers"]), window,
                           str(row["hidden"]), f"{row['heads']}/{row['kv_heads']}", f"{row['vocab']:,}",
                           "lm (tied)" if row["tied"] and row["head"] == "lm" else row["head"],
                           eng(row["forward_flops_per_token"])])
    return table


def _row_of(term: str) -> str:
    """Table row of a term: its module, with every LoRA matrix in one row."""
    return "LoRA adapters" if ".lora_" in term else component(term)


def estimate_table(data: dict[str, Any], all_terms: bool) -> tuple[Table, str]:
    """One phase's breakdown by module (or by term) and the line under it."""
    total = data["flops"]
    req = data["request"]
    shape = ", ".join(f"{k}={v}" for k, v in req.items() if v not in (None, "none") and k != "lora")
    if req["lora"]:
        shape += f", LoRA r={req['lora']['rank']} on {','.join(req['lora']['targets'])}"
    title = f"{data['model']} {data['phase']}: {shape}"
    if all_terms:
        table = Table(title, ["term", "FLOPs", "share"])
        table.align = "lrr"
        for key, value in data["terms"].items():
            table.rows.append([key, f"{value:,}", percent(value, total)])
        table.sections.add(len(table.rows))
        table.rows.append(["total", f"{total:,}", eng(total)])
    else:
        cells: dict[str, dict[str, int]] = {}
        passes: list[str] = []
        for key, value in data["terms"].items():
            section = key.split("/", 1)[0] if "/" in key else "forward"
            if section not in passes:
                passes.append(section)
            row = cells.setdefault(_row_of(key), {})
            row[section] = row.get(section, 0) + value
        table = Table(title, ["module", *passes, "total", "share"])
        table.align = "l" + "r" * (len(passes) + 2)
        last = ("LoRA adapters", "head")  # LoRA after the base modules, the head at the bottom
        order = [n for n in cells if n not in last] + [n for n in last if n in cells]
        for name in order:
            row = cells[name]
            row_total = sum(row.values())
            table.rows.append([name, *(eng(row[s]) if s in row else "-" for s in passes), eng(row_total),
                               percent(row_total, total)])
        sums = [sum(row.get(s, 0) for row in cells.values()) for s in passes]
        table.sections.add(len(table.rows))
        table.rows.append(["total", *(eng(v) for v in sums), f"{total:,}", "100.0 %"])
    per_token = total / data["tokens"] if data["tokens"] else 0
    conv = data["conventions"]
    line = (f"{eng(per_token)} per token over {data['tokens']:,} tokens; attention {conv['attention']}, "
            f"kernel {conv['attention_kernel']}" + (f", experts {conv['experts']}" if "experts" in conv else "")
            + (f", window {conv['window']}" if "window" in conv else "") + f", {conv['flop']}."
            + "".join(f"\n{note}." for note in data.get("notes", [])))
    return table, line


__all__ = ["FORMATS", "console", "estimate_table", "models_table", "print_tables", "provenance", "render"]
