"""The ``flopplan`` command line: parses, calls the API, renders. Bad input -> one line on stderr, exit 2."""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import click

from flopplan import __version__
from flopplan.errors import UserError

EXIT_BAD_INPUT = 2


def fail(message: str) -> NoReturn:
    raise UserError(message)


class FlopplanGroup(click.Group):
    """A click group whose errors are one line on stderr and exit code 2, never a traceback."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        try:
            return super().main(args=args, prog_name=prog_name, complete_var=complete_var, standalone_mode=False,
                                **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("flopplan: aborted", err=True)
            sys.exit(130)
        except click.ClickException as exc:
            click.echo(f"flopplan: {exc.format_message()}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except UserError as exc:
            click.echo(f"flopplan: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except BrokenPipeError:
            sys.exit(0)


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2))


def console() -> Any:
    """A rich console; wide enough for the tables when output goes to a file or a pipe."""
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 160)


@click.group(cls=FlopplanGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="flopplan")
def main() -> None:
    """flopplan: where RL post-training compute goes.

    Exact FLOP counts for Qwen2.5 and any Hugging Face decoder; GRPO budgets split into rollout/search,
    learning and feedback.
    """


# -- models -----------------------------------------------------------------------------------------------------

@main.command()
@click.option("--context", default=4096, show_default=True, type=int,
              help="Sequence length at which forward FLOPs per token are stated.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def models(context: int, as_json: bool) -> None:
    """The model registry: parameters and forward FLOPs per token."""
    from flopplan.arch import REGISTRY
    from flopplan.formulas import forward_flops

    if context <= 0:
        fail(f"--context must be a positive integer, not {context}")
    rows = []
    for spec in REGISTRY.values():
        total = forward_flops(spec, 1, context, context).total
        rows.append({"name": spec.name, "params": spec.params, "params_non_embedding": spec.params_non_embedding,
                     "layers": spec.num_layers, "hidden": spec.hidden_size, "heads": spec.num_heads,
                     "kv_heads": spec.num_kv_heads, "vocab": spec.vocab_size, "tied": spec.tie_embeddings,
                     "head": spec.head.kind, "context": context, "forward_flops": total,
                     "forward_flops_per_token": total / context})
    if as_json:
        echo_json(rows)
        return
    from rich.table import Table

    from flopplan.report.units import count, eng

    table = Table(title=f"Registry (forward FLOPs per token: one sequence of {context} tokens, logits everywhere, "
                        "dense attention)", title_justify="left")
    for name, justify in (("model", "left"), ("params", "right"), ("non-emb", "right"), ("L", "right"),
                          ("h", "right"), ("q/kv heads", "right"), ("vocab", "right"), ("head", "left"),
                          ("fwd/token", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(row["name"], count(row["params"]), count(row["params_non_embedding"]), str(row["layers"]),
                      str(row["hidden"]), f"{row['heads']}/{row['kv_heads']}", f"{row['vocab']:,}",
                      "lm (tied)" if row["tied"] and row["head"] == "lm" else row["head"],
                      eng(row["forward_flops_per_token"]))
    console().print(table)


# -- estimate ---------------------------------------------------------------------------------------------------

def _lora_option(rank: int | None, targets: str | None) -> Any:
    from flopplan.formulas import LoRA

    if rank is None:
        if targets is not None:
            fail("--lora-targets needs --lora-rank")
        return None
    names = tuple(t.strip() for t in targets.split(",") if t.strip()) if targets is not None else None
    try:
        return LoRA(rank, names) if names is not None else LoRA(rank)
    except ValueError as exc:
        fail(str(exc))


def _conventions(attention: str, kernel: str) -> Any:
    from flopplan.formulas import Conventions

    return Conventions(attention=attention, attention_kernel=kernel)


@main.command()
@click.option("--model", "model_name", required=True, metavar="NAME|CONFIG_JSON",
              help="A registry name (see `flopplan models`) or a Hugging Face config.json (file or folder).")
@click.option("--phase", required=True, type=click.Choice(["forward", "decode", "generate", "train"]))
@click.option("--batch", default=1, show_default=True, type=int, help="Sequences in the batch.")
@click.option("--seq", type=int, help="Tokens per sequence (forward, train).")
@click.option("--context", type=int, help="Tokens already in the KV cache (decode).")
@click.option("--prompt", type=int, help="Prompt tokens (generate).")
@click.option("--completion", type=int, help="New tokens generated (generate).")
@click.option("--logits", help="Head positions per sequence: all (default), last, or N (the last N).")
@click.option("--lora-rank", type=int, help="LoRA rank: adapters active in forward phases, trained in train.")
@click.option("--lora-targets", metavar="q_proj,v_proj,...", help="LoRA target projections (default: all seven).")
@click.option("--grad-ckpt", is_flag=True, help="Gradient checkpointing, non-reentrant (transformers' default).")
@click.option("--reentrant", is_flag=True, help="With --grad-ckpt: reentrant checkpointing (whole layer re-run).")
@click.option("--input-grads/--no-input-grads", default=None,
              help="Whether the embedding output requires grad under LoRA (default: as transformers does, "
                   "on with --grad-ckpt).")
@click.option("--attention", default="dense", show_default=True, type=click.Choice(["dense", "causal"]),
              help="dense: the full score matrix (FlopCounterMode); causal: the computed triangle only.")
@click.option("--attention-kernel", default="eager", show_default=True, type=click.Choice(["eager", "sdpa"]),
              help="Attention backward as eager matmuls (2x forward) or fused SDPA/flash as counted on GPU (2.5x).")
@click.option("--terms", "all_terms", is_flag=True, help="List every term instead of the table by module.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def estimate(model_name: str, phase: str, batch: int, seq: int | None, context: int | None, prompt: int | None,
             completion: int | None, logits: str | None, lora_rank: int | None, lora_targets: str | None,
             grad_ckpt: bool, reentrant: bool, input_grads: bool | None, attention: str, attention_kernel: str,
             all_terms: bool, as_json: bool) -> None:
    """Exact FLOPs of one phase of one model, by term."""
    from flopplan.arch import resolve
    from flopplan.estimate import EstimateRequest, result_json
    from flopplan.estimate import estimate as run_estimate

    if reentrant and not grad_ckpt:
        fail("--reentrant needs --grad-ckpt")
    if lora_rank is not None and lora_rank <= 0:
        fail(f"--lora-rank must be a positive integer, not {lora_rank}")
    spec = resolve(model_name)
    req = EstimateRequest(
        phase=phase, batch=batch, seq=seq, context=context, prompt=prompt, completion=completion, logits=logits,
        lora=_lora_option(lora_rank, lora_targets),
        checkpointing=("reentrant" if reentrant else "non-reentrant") if grad_ckpt else "none",
        input_grads=input_grads, conventions=_conventions(attention, attention_kernel))
    terms = run_estimate(spec, req)
    data = result_json(spec, req, terms)
    if as_json:
        echo_json(data)
        return
    _render_estimate(data, all_terms)


def _row_of(term: str) -> str:
    """Table row of a term: its module, with every LoRA matrix in one row."""
    from flopplan.formulas import component

    return "LoRA adapters" if ".lora_" in term else component(term)


def _render_estimate(data: dict[str, Any], all_terms: bool) -> None:
    from rich.table import Table

    from flopplan.report.units import eng, percent

    total = data["flops"]
    req = data["request"]
    shape = ", ".join(f"{k}={v}" for k, v in req.items() if v not in (None, "none") and k != "lora")
    if req["lora"]:
        shape += f", LoRA r={req['lora']['rank']} on {','.join(req['lora']['targets'])}"
    table = Table(title=f"{data['model']} {data['phase']}: {shape}", title_justify="left")
    if all_terms:
        table.add_column("term")
        table.add_column("FLOPs", justify="right")
        table.add_column("share", justify="right")
        for key, value in data["terms"].items():
            table.add_row(key, f"{value:,}", percent(value, total))
        table.add_section()
        table.add_row("total", f"{total:,}", eng(total))
    else:
        cells: dict[str, dict[str, int]] = {}
        passes: list[str] = []
        for key, value in data["terms"].items():
            section = key.split("/", 1)[0] if "/" in key else "forward"
            if section not in passes:
                passes.append(section)
            row = cells.setdefault(_row_of(key), {})
            row[section] = row.get(section, 0) + value
        table.add_column("module")
        for section in passes:
            table.add_column(section, justify="right")
        table.add_column("total", justify="right")
        table.add_column("share", justify="right")
        last = ("LoRA adapters", "head")  # LoRA after the base modules, the head at the bottom
        order = [n for n in cells if n not in last] + [n for n in last if n in cells]
        for name in order:
            row = cells[name]
            row_total = sum(row.values())
            table.add_row(name, *(eng(row[s]) if s in row else "-" for s in passes), eng(row_total),
                          percent(row_total, total))
        table.add_section()
        sums = [sum(row.get(s, 0) for row in cells.values()) for s in passes]
        table.add_row("total", *(eng(v) for v in sums), f"{total:,}", "100.0 %")
    con = console()
    con.print(table)
    per_token = total / data["tokens"] if data["tokens"] else 0
    conv = data["conventions"]
    con.print(f"{eng(per_token)} per token over {data['tokens']:,} tokens; attention {conv['attention']}, "
              f"kernel {conv['attention_kernel']}, {conv['flop']}.")


# -- formula ----------------------------------------------------------------------------------------------------

@main.command()
@click.option("--phase", required=True, type=click.Choice(["forward", "decode", "generate", "train"]))
@click.option("--latex", is_flag=True, help="LaTeX instead of plain text.")
@click.option("--lora", is_flag=True, help="With LoRA adapters of rank r on all seven projections.")
@click.option("--grad-ckpt", is_flag=True, help="train: non-reentrant gradient checkpointing.")
@click.option("--attention", default="dense", show_default=True, type=click.Choice(["dense", "causal"]))
@click.option("--attention-kernel", default="eager", show_default=True, type=click.Choice(["eager", "sdpa"]))
@click.option("--json", "as_json", is_flag=True)
def formula(phase: str, latex: bool, lora: bool, grad_ckpt: bool, attention: str, attention_kernel: str,
            as_json: bool) -> None:
    """The closed form of a phase, in symbols (from the same definitions as the integer counts)."""
    from flopplan.report.formula import formula_text

    if grad_ckpt and phase != "train":
        fail("--grad-ckpt applies to --phase train only")
    data = formula_text(phase, latex=latex, lora=lora, checkpointing="non-reentrant" if grad_ckpt else "none",
                        conv=_conventions(attention, attention_kernel))
    if as_json:
        echo_json(data)
        return
    click.echo(f"% {phase} FLOPs, attention {attention}, kernel {attention_kernel}"
               + (", LoRA" if lora else "") + (", gradient checkpointing" if grad_ckpt else ""))
    for key, value in data["components"].items():
        click.echo(f"{key} = {value}")
    click.echo(f"total = {data['total']}")
    click.echo("where " + "; ".join(f"{k}: {v}" for k, v in data["symbols"].items()))


# -- tables ----------------------------------------------------------------------------------------------------

@main.command()
@click.option("--out", "out_dir", default="tables", show_default=True, type=click.Path(file_okay=False),
              help="Folder to write the tables into.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if any committed table differs.")
def tables(out_dir: str, check: bool) -> None:
    """Regenerate the paper tables (Markdown, LaTeX, CSV) from the closed form."""
    from flopplan.report.generate import stale_tables, write_tables

    if check:
        stale = stale_tables(out_dir)
        if stale:
            click.echo(f"flopplan: stale tables in {out_dir}: {', '.join(stale)} (run `flopplan tables`)", err=True)
            sys.exit(1)
        click.echo(f"all tables in {out_dir} are up to date")
        return
    for path in write_tables(out_dir):
        click.echo(f"wrote {path}")


if __name__ == "__main__":  # pragma: no cover
    main()
