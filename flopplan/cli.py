"""The ``flopplan`` command line: parses, calls the API, renders. Bad input -> one line on stderr, exit 2."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
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
    try:
        text = json.dumps(data, indent=2, allow_nan=False)
    except ValueError:
        fail("the result holds a non-finite number (inf or nan), which JSON cannot carry")
    click.echo(text)


def console() -> Any:
    """A rich console; wide enough for the tables when output goes to a file or a pipe."""
    from rich.console import Console

    return Console(highlight=False, width=None if sys.stdout.isatty() else 180)


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


# -- plan and compare -------------------------------------------------------------------------------------------

DEFAULT_BUDGET_FLOPS = 10**19
DEFAULT_MODELS = ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b")
FORMATS = ("table", "json", "csv", "markdown", "latex")


def parse_number(text: str, what: str) -> int | float:
    """``1e19``, ``10000``, ``2.5e3`` -> an int when integral (FLOP budgets stay exact), else a float."""
    from decimal import Decimal, InvalidOperation

    try:
        value = Decimal(text.replace("_", "").replace(",", ""))
    except InvalidOperation:
        fail(f"{what} must be a number, not {text!r}")
    if not value.is_finite() or value <= 0:
        fail(f"{what} must be a positive number, not {text!r}")
    return int(value) if value == value.to_integral_value() else float(value)


def recipe_options(func: Any) -> Any:
    """The options of every recipe field (they override --recipe FILE, which overrides the defaults)."""
    options = [
        click.option("--recipe", "recipe_file", type=click.Path(dir_okay=False),
                     help="A recipe file (TOML or JSON) to start from; options below override it."),
        click.option("--reward", help="rule | orm:MODEL | prm:MODEL (default rule; prm alone: qwen2.5-math-prm-7b)."),
        click.option("--group-size", "-G", type=int, help="Completions per prompt, G (default 8)."),
        click.option("--prompts-per-step", type=int, help="Prompts per GRPO step (default 64)."),
        click.option("--prompt-len", help="Prompt tokens: N, MEAN:MAX, or @FILE of lengths (default 256)."),
        click.option("--completion-len", help="Completion tokens: N, MEAN:MAX, or @FILE (default 1024)."),
        click.option("--iterations", "--mu", type=int, help="Policy updates per generation round, mu (default 1)."),
        click.option("--beta", type=float, help="KL coefficient; > 0 adds a reference forward (default 0)."),
        click.option("--lora-rank", type=int, help="LoRA rank (default 64)."),
        click.option("--lora-targets", help="LoRA target projections (default all seven)."),
        click.option("--full", "full_ft", is_flag=True, default=None, help="Full fine-tuning instead of LoRA."),
        click.option("--old-logprobs", type=click.Choice(["auto", "on", "off"]),
                     help="Recompute old-policy logprobs: auto = when mu > 1 or with vllm (TRL)."),
        click.option("--grad-ckpt/--no-grad-ckpt", default=None, help="Gradient checkpointing (default on, TRL)."),
        click.option("--logits", type=click.Choice(["completion", "all"]),
                     help="Update/score logits on completion + 1 positions (TRL, default) or all."),
        click.option("--engine", type=click.Choice(["hf", "vllm"]), help="Rollout engine traits (default hf)."),
        click.option("--prefix-sharing", is_flag=True, default=None, help="vllm: prompt prefill once per group."),
        click.option("--generation-batch", type=int, help="hf: sequences per generate call (default: all)."),
        click.option("--micro-batch", type=int, help="Sequences per update forward/backward (default G)."),
        click.option("--update-padding", type=click.Choice(["batch", "none"]),
                     help="Pad update micro-batches to their longest (TRL, default) or not (packed, verl)."),
        click.option("--optimizer-batch", type=int, help="Sequences per optimizer step (default: all)."),
        click.option("--reward-overhead", type=int, help="Template tokens a reward model reads (default 32)."),
        click.option("--prm-steps", type=int, help="Steps per response, one separator token each (default 8)."),
        click.option("--eval-every", type=int, help="Greedy evaluation every K steps (own bucket)."),
        click.option("--eval-prompts", type=int, help="Prompts per evaluation."),
        click.option("--eval-at-start/--no-eval-at-start", default=None,
                     help="With evaluation: a baseline evaluation before the first step (default on)."),
        click.option("--eval-prompt-len", help="Eval prompt tokens (default: --prompt-len)."),
        click.option("--eval-completion-len", help="Eval completion tokens (default: --completion-len)."),
        click.option("--attention", type=click.Choice(["dense", "causal"]), help="Attention convention."),
        click.option("--attention-kernel", type=click.Choice(["eager", "sdpa"]), help="Attention backward kernel."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


_RECIPE_KEYS = ("reward", "group_size", "prompts_per_step", "prompt_len", "completion_len", "iterations", "beta",
                "lora_rank", "lora_targets", "full_ft", "old_logprobs", "grad_ckpt", "logits", "engine",
                "prefix_sharing", "generation_batch", "micro_batch", "update_padding", "optimizer_batch",
                "reward_overhead", "prm_steps", "eval_every", "eval_prompts", "eval_at_start", "eval_prompt_len",
                "eval_completion_len", "attention", "attention_kernel")


def build_recipe(recipe_file: str | None, opts: dict[str, Any]) -> Any:
    """A Recipe from defaults, then the file, then the command-line options that were given."""
    from flopplan.recipe import Recipe

    return build_recipe_from(Recipe.load(recipe_file) if recipe_file else Recipe(), opts)


def build_recipe_from(base: Any, opts: dict[str, Any]) -> Any:
    """``base`` with the recipe options that were given on the command line."""
    from flopplan.lengths import Length
    from flopplan.recipe import RewardSystem

    changes: dict[str, Any] = {}
    rename = {"reward_overhead": "reward_overhead_tokens"}
    for key in _RECIPE_KEYS:
        value = opts.get(key)
        if value is None:
            continue
        if key == "reward":
            changes["reward"] = RewardSystem.parse(value)
        elif key in ("prompt_len", "completion_len", "eval_prompt_len", "eval_completion_len"):
            changes[key] = Length.parse(value, "--" + key.replace("_", "-"))
        elif key == "lora_targets":
            changes["lora_targets"] = tuple(t.strip() for t in value.split(",") if t.strip())
        elif key == "full_ft":
            if opts.get("lora_rank") is not None:
                fail("--full and --lora-rank contradict each other")
            changes["lora_rank"] = None
        else:
            changes[rename.get(key, key)] = value
    if "lora_targets" in changes and changes.get("lora_rank", base.lora_rank) is None:
        fail("--lora-targets needs LoRA (not --full)")
    return base.with_(**changes)


def budget_from(budget: str | None, gpu_hours: float | None, dollars: float | None) -> Any:
    from flopplan.planner import Budget

    given = sum(v is not None for v in (budget, gpu_hours, dollars))
    if given > 1:
        fail("give one budget: --budget FLOPS, --gpu-hours H or --dollars D")
    if gpu_hours is not None:
        return Budget(gpu_hours=gpu_hours)
    if dollars is not None:
        return Budget(dollars=dollars)
    return Budget(flops=parse_number(budget, "--budget") if budget is not None else DEFAULT_BUDGET_FLOPS)


def profile_from(device: str | None, profile: str | None, price: float | None, engine: str) -> Any:
    from flopplan.hardware import load_profile, resolve_profile

    if device and profile:
        fail("give --device or --profile, not both")
    if price is not None and price <= 0:
        fail(f"--price-per-gpu-hour must be positive, not {price}")
    if profile:
        return load_profile(profile, price)
    if device:
        return resolve_profile(device, engine, price)
    if price is not None:
        fail("--price-per-gpu-hour needs --device or --profile")
    return None


def budget_options(func: Any) -> Any:
    options = [
        click.option("--budget", help=f"FLOP budget, e.g. 1e19 (default {DEFAULT_BUDGET_FLOPS:.0e})."),
        click.option("--gpu-hours", type=float, help="Budget in GPU-hours (needs --device or --profile)."),
        click.option("--dollars", type=float, help="Budget in dollars (needs a profile and a price)."),
        click.option("--device", help="Datasheet profile: h100, h100-pcie, h200, a100, l40s, b200, mi300x."),
        click.option("--profile", "profile_file", type=click.Path(dir_okay=False),
                     help="A calibrated profile JSON (flopplan calibrate)."),
        click.option("--price-per-gpu-hour", type=float, help="Dollars per GPU-hour, for dollar budgets."),
        click.option("--format", "fmt", default="table", show_default=True, type=click.Choice(FORMATS)),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def render_tables(tables: list[Any], fmt: str, notes: list[str], command: str, extra_json: Any = None,
                  plans: list[Any] | None = None) -> None:
    from flopplan.report.plan_tables import plans_to_csv
    from flopplan.report.tables import provenance, to_latex, to_markdown

    if fmt == "json":
        echo_json(extra_json)
    elif fmt == "markdown":
        click.echo(to_markdown(tables, command), nl=False)
    elif fmt == "latex":
        click.echo(to_latex(tables, command), nl=False)
    elif fmt == "csv":
        click.echo(plans_to_csv(plans or [], provenance(command)), nl=False)
    else:
        from rich.table import Table as RichTable

        con = console()
        for table in tables:
            rich = RichTable(title=table.title, title_justify="left")
            for name, align in zip(table.columns, table.alignment(), strict=True):
                rich.add_column(name, justify="right" if align == "r" else "left")
            for row in table.rows:
                rich.add_row(*row)
            con.print(rich)
        for note in notes:
            con.print(f"- {note}")


def _models_option(models: tuple[str, ...]) -> list[str]:
    names = [m.strip() for value in models for m in value.split(",") if m.strip()]
    if models and not names:
        fail("--model/--models was given without a model name")
    return names or list(DEFAULT_MODELS)


def _command_line() -> str:
    import shlex

    return "flopplan " + " ".join(shlex.quote(a) for a in sys.argv[1:])


@main.command()
@click.option("--model", "models", multiple=True, metavar="NAME",
              help="Policy (repeatable or comma-separated; default Qwen2.5 0.5B to 14B).")
@recipe_options
@budget_options
@click.option("--solve", "free", type=click.Choice(["steps", "group_size", "prompts_per_step", "iterations"]),
              default="steps", show_default=True, help="The free quantity; others need --steps.")
@click.option("--steps", type=int, help="GRPO steps to afford (with --solve or --largest-model).")
@click.option("--target-learning-share", type=float,
              help="Solve --solve iterations|group_size for this learning share (0-1) instead of a budget.")
@click.option("--largest-model", is_flag=True, help="The largest registry model that affords --steps steps.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False), help="Write a versioned plan file (JSON).")
@click.option("--save-recipe", type=click.Path(dir_okay=False), help="Write the effective recipe (TOML/JSON).")
def plan(models: tuple[str, ...], recipe_file: str | None, budget: str | None, gpu_hours: float | None,
         dollars: float | None, device: str | None, profile_file: str | None, price_per_gpu_hour: float | None,
         fmt: str, free: str, steps: int | None, target_learning_share: float | None, largest_model: bool,
         out_file: str | None, save_recipe: str | None, **recipe_opts: Any) -> None:
    """What a budget buys for each model: GRPO steps, rollouts, updates, reward calls, and the split into
    rollout/search, learning and feedback.

    With no options: a 1e19 FLOP budget, LoRA r=64, G=8, 64 prompts per step, 256-token prompts, 1024-token
    completions, rule reward, Qwen2.5 0.5B to 14B.
    """
    from flopplan import planner as P
    from flopplan.fileio import atomic_write_json
    from flopplan.report.plan_tables import phase_table, plan_notes, plans_json, same_flop_table, time_table

    base = build_recipe(recipe_file, recipe_opts)
    names = _models_option(models) if (models or not recipe_file) else [base.policy]
    the_budget = budget_from(budget, gpu_hours, dollars)
    prof = profile_from(device, profile_file, price_per_gpu_hour, base.engine)
    _steps_option(steps)
    notes: list[str] = []
    if target_learning_share is not None and (largest_model or steps is not None):
        fail("--target-learning-share solves for a share, not for steps: drop --largest-model and --steps")
    if largest_model and (free != "steps" or models):
        fail("--largest-model searches the registry for the model: it takes neither --model nor --solve")
    if target_learning_share is not None:
        if free not in ("iterations", "group_size"):
            fail("--target-learning-share needs --solve iterations or --solve group_size")
        plans = []
        for name in names:
            solved, share, share_notes = P.solve_share(base.with_(policy=name), target_learning_share, free)
            one = P.plan(solved, the_budget, prof)
            one.notes += [f"{free}={getattr(solved, free)} gives a learning share of {share:.1%}", *share_notes]
            plans.append(one)
    elif largest_model:
        if steps is None:
            fail("--largest-model needs --steps N")
        plans = [P.largest_model(base, the_budget, steps, prof)]
    elif free != "steps":
        plans = [P.solve(base.with_(policy=name), the_budget, free, steps, prof) for name in names]
    else:
        if steps is not None:
            fail("--steps applies with --solve group_size|prompts_per_step|iterations or --largest-model")
        plans = P.compare_models(base, names, the_budget, prof)
    P.require_steps(plans)
    if save_recipe:
        plans[0].recipe.save(save_recipe)  # the effective recipe, solved values included
    command = _command_line()
    if out_file:
        atomic_write_json(out_file, P.plans_file_data(plans, command))
    tables = [same_flop_table(plans, with_time=prof is not None), phase_table(plans)]
    if prof is not None:
        tables.append(time_table(plans))
    render_tables(tables, fmt, [*notes, *plan_notes(plans)] + ([f"plan file: {out_file}"] if out_file else []),
                  command, plans_json(plans), plans)


@main.command()
@click.option("--models", "models", multiple=True, metavar="A,B,...", help="Policies (default Qwen2.5 0.5B-14B).")
@click.option("--rewards", "rewards", multiple=True, metavar="R1,R2,...",
              help="Reward systems (default rule, orm:qwen2.5-1.5b, prm:qwen2.5-math-prm-7b, prm:qwen2.5-1.5b).")
@recipe_options
@budget_options
def compare(models: tuple[str, ...], rewards: tuple[str, ...], recipe_file: str | None, budget: str | None,
            gpu_hours: float | None, dollars: float | None, device: str | None, profile_file: str | None,
            price_per_gpu_hour: float | None, fmt: str, **recipe_opts: Any) -> None:
    """Same-FLOP comparisons: every model size under one budget, and every feedback system per model."""
    from flopplan import planner as P
    from flopplan.report.plan_tables import phase_table, plan_notes, same_flop_table

    base = build_recipe(recipe_file, recipe_opts)
    names = _models_option(models)
    reward_names = [r.strip() for value in rewards for r in value.split(",") if r.strip()]
    if rewards and not reward_names:
        fail("--rewards was given without a reward system")
    reward_names = reward_names or list(DEFAULT_REWARDS)
    the_budget = budget_from(budget, gpu_hours, dollars)
    prof = profile_from(device, profile_file, price_per_gpu_hour, base.engine)
    sizes = P.compare_models(base, names, the_budget, prof)
    feedback = P.compare_rewards(base, reward_names, the_budget, names, prof)
    P.require_steps(sizes + feedback)
    tables = [same_flop_table(sizes, f"Model sizes at equal FLOPs ({the_budget.describe()}, reward {base.reward})",
                              prof is not None),
              same_flop_table(feedback, f"Feedback systems at equal FLOPs ({the_budget.describe()})",
                              prof is not None),
              phase_table(feedback, "Where the FLOPs go, by phase and feedback system")]
    data = {"budget_flops": the_budget.flops, "budget": the_budget.to_data(),
            "model_sizes": [p.to_data() for p in sizes], "feedback_systems": [p.to_data() for p in feedback]}
    render_tables(tables, fmt, plan_notes(sizes), _command_line(), data, sizes + feedback)


DEFAULT_REWARDS = ("rule", "orm:qwen2.5-1.5b", "prm:qwen2.5-math-prm-7b", "prm:qwen2.5-1.5b")


# -- train and report -------------------------------------------------------------------------------------------

TRAIN_DEFAULTS: dict[str, Any] = {"policy": "tiny", "lora_rank": None, "prompts_per_step": 16, "group_size": 16,
                  "completion_len": 2, "micro_batch": 64, "eval_every": 10, "eval_prompts": 200}
"""`flopplan train` with no recipe or plan: the tiny policy, fully fine-tuned from random initialisation on the
built-in digits task (a digit and EOS: two new tokens). LoRA on a random-initialised 300k-parameter model learns
unreliably; any other policy (--model, --model-path) gets the recipe default, LoRA r=64, unless --full or
--lora-rank says otherwise."""


@main.command()
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Run folder: new or empty (with --resume: the run to continue).")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), help="A plan file (flopplan plan --out).")
@click.option("--plan-model", help="Which model's plan to run when the plan file holds several.")
@click.option("--budget", help="FLOP budget (default: the plan's).")
@click.option("--steps", "max_steps", type=int, help="Stop after N steps (also without a budget).")
@click.option("--model", "model_name", help="Policy: tiny (default), or a registry name with --random-init.")
@click.option("--model-path", type=click.Path(file_okay=False), help="A local model folder (weights + tokenizer).")
@click.option("--random-init", is_flag=True, help="Registry architecture without weights (FLOP/time-faithful).")
@click.option("--task", default="digits", show_default=True, help="Built-in task: digits[:first|last|max|sum[:N]].")
@click.option("--dataset", type=click.Path(dir_okay=False), help="JSONL {prompt, answer} (GSM8K '#### x' ok).")
@click.option("--eval-dataset", type=click.Path(dir_okay=False), help="JSONL held-out set.")
@click.option("--train-size", default=20000, show_default=True, type=int, help="Built-in task problems.")
@recipe_options
@click.option("--lr", type=float, help="AdamW learning rate (default 3e-3 tiny, 1e-5 LoRA, 1e-6 full).")
@click.option("--lora-alpha", type=int, help="LoRA alpha (default 2 x rank).")
@click.option("--temperature", default=1.0, show_default=True, type=float, help="Sampling temperature.")
@click.option("--clip-eps", default=0.2, show_default=True, type=float, help="Lower clip of the ratio.")
@click.option("--clip-eps-high", type=float, help="Upper clip (default = --clip-eps; DAPO uses 0.28).")
@click.option("--scale-rewards", default="group", show_default=True, type=click.Choice(["group", "none"]),
              help="Divide advantages by the group std (GRPO) or not (Dr. GRPO).")
@click.option("--loss-aggregation", default="token", show_default=True, type=click.Choice(["token", "sequence"]))
@click.option("--max-grad-norm", default=1.0, show_default=True, type=float)
@click.option("--weight-decay", default=0.0, show_default=True, type=float)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--checkpoint-every", default=10, show_default=True, type=int)
@click.option("--resume", is_flag=True,
              help="Continue the run in --out from its last checkpoint (--steps/--budget may extend it).")
@click.option("--measure-flops", is_flag=True, help="Also count every phase with torch FlopCounterMode.")
@click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda"]))
@click.option("--format-reward", default=0.0, show_default=True, type=float, help="Reward for a well-formed answer.")
@click.option("--reward-model-path", type=click.Path(file_okay=False), help="A local reward model folder.")
@click.option("--prm-aggregate", default="min", show_default=True, type=click.Choice(["min", "prod", "last"]))
@click.option("--prm-max-steps", default=32, show_default=True, type=int)
@click.option("--eval-batch", type=int, help="Prompts per evaluation generate call (default: all, one call).")
@click.option("--no-eval", is_flag=True, help="No held-out evaluation.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def train(out_dir: str, plan_file: str | None, plan_model: str | None, budget: str | None, max_steps: int | None,
          model_name: str | None, model_path: str | None, random_init: bool, task: str, dataset: str | None,
          eval_dataset: str | None, train_size: int, recipe_file: str | None, lr: float | None,
          lora_alpha: int | None, temperature: float, clip_eps: float, clip_eps_high: float | None,
          scale_rewards: str, loss_aggregation: str, max_grad_norm: float, weight_decay: float, seed: int,
          checkpoint_every: int, resume: bool, measure_flops: bool, device: str, format_reward: float,
          reward_model_path: str | None, prm_aggregate: str, prm_max_steps: int, eval_batch: int | None,
          no_eval: bool, no_progress: bool, **recipe_opts: Any) -> None:
    """Run GRPO with a FLOP ledger that never exceeds the budget (the validating run of a plan)."""
    from flopplan.train.config import TrainConfig

    if no_eval:
        if recipe_opts.get("eval_every") or recipe_opts.get("eval_prompts"):
            fail("--no-eval contradicts --eval-every/--eval-prompts")
        recipe_opts = {**recipe_opts, "no_eval": True}
    extend: dict[str, Any] = {}
    if resume:
        ctx = click.get_current_context()
        given = sorted(name for name in ctx.params
                       if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
                       and name not in RESUME_OPTIONS)
        if given:
            option = next(p.opts[0] for p in ctx.command.params if p.name == given[0])
            fail(f"--resume continues the run as it was configured; it takes only --out, --steps, --budget and "
                 f"--no-progress, not {option}")
        config = _resume_config(out_dir)
        extend["out_dir"] = out_dir  # the folder given now, wherever the run was made
        if max_steps is not None:  # a finished run can be continued for more steps or with a larger budget
            extend["max_steps"] = _steps_option(max_steps)
        if budget is not None:
            extend["budget_flops"] = _flop_budget_option(budget)
        from flopplan.train.config import replace_config

        config = replace_config(config, **extend)
    else:
        config = _train_config(out_dir, plan_file, plan_model, budget, max_steps, model_name, model_path,
                               random_init, task, dataset, eval_dataset, train_size, recipe_file, recipe_opts,
                               dict(lr=lr, lora_alpha=lora_alpha, temperature=temperature, clip_low=clip_eps,
                                    clip_high=clip_eps if clip_eps_high is None else clip_eps_high,
                                    scale_rewards=scale_rewards, loss_aggregation=loss_aggregation,
                                    max_grad_norm=max_grad_norm, weight_decay=weight_decay, seed=seed,
                                    checkpoint_every=checkpoint_every, measure_flops=measure_flops, device=device,
                                    format_reward=format_reward, reward_model_path=reward_model_path,
                                    prm_aggregate=prm_aggregate, prm_max_steps=prm_max_steps,
                                    eval_batch=eval_batch))
        assert isinstance(config, TrainConfig)
    try:
        from flopplan.measure import quiet_transformers
        from flopplan.train.trainer import Trainer
    except ImportError as exc:
        fail(f"flopplan train needs the torch extra (pip install 'flopplan[torch]'): {exc}")
    quiet_transformers()
    trainer = Trainer(config, resume=resume, progress=not no_progress and sys.stdout.isatty())
    if set(extend) - {"out_dir"}:  # the checkpoint accepted the extension: record it with the run
        from flopplan.fileio import atomic_write_json, read_json

        stored = read_json(f"{out_dir}/config.json", "run config")
        atomic_write_json(f"{out_dir}/config.json", {**stored, **extend, "out_dir": stored.get("out_dir")})
    con = console()
    if trainer.random_policy and config.model_path is None:
        con.print(f"policy {trainer.spec.name}: random-initialised ({trainer.spec.params:,} parameters)")
    if trainer.reward_model is not None and trainer.reward_model.random_init:
        con.print(f"reward model {trainer.reward_model.spec.name}: random-initialised, its scores are meaningless "
                  "(the FLOPs and the plumbing are real)")
    summary = trainer.run()
    _render_run(summary, out_dir)


RESUME_OPTIONS = {"out_dir", "resume", "max_steps", "budget", "no_progress"}


def _steps_option(steps: int | None) -> int | None:
    if steps is not None and steps <= 0:
        fail(f"--steps must be a positive integer, not {steps}")
    return steps


def _flop_budget_option(budget: str | None) -> int | None:
    """``--budget`` of a training run: a whole number of FLOPs up to the planner's cap."""
    from flopplan.planner import BUDGET_LIMITS, budget_cap

    if budget is None:
        return None
    value = parse_number(budget, "--budget")
    if not isinstance(value, int) or value > BUDGET_LIMITS["flops"]:
        fail(f"--budget must be a whole number of FLOPs, at most {budget_cap('flops')}")
    return value


def _check_plan_entry(entry: dict[str, Any], plan_file: str) -> None:
    """A plan the run compares itself with must carry integer steps and integer FLOPs per bucket."""
    from flopplan.cost import BUCKETS, is_bucket_flops

    flops, steps = entry.get("flops"), entry.get("steps")
    if not is_bucket_flops(flops):
        fail(f"plan file {plan_file!r} is malformed: flops must map {', '.join((*BUCKETS, 'total'))} to integers")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        fail(f"plan file {plan_file!r} is malformed: steps must be a whole number, not {steps!r}")


def _train_config(out_dir: str, plan_file: str | None, plan_model: str | None, budget: str | None,
                  max_steps: int | None, model_name: str | None, model_path: str | None, random_init: bool,
                  task: str, dataset: str | None, eval_dataset: str | None, train_size: int,
                  recipe_file: str | None, recipe_opts: dict[str, Any], knobs: dict[str, Any]) -> Any:
    from flopplan.planner import BUDGET_LIMITS, load_plan_file, recipe_of_plan
    from flopplan.recipe import Recipe
    from flopplan.train.config import TrainConfig

    plan_entry = None
    if plan_file:
        if recipe_file:
            fail("--plan carries its recipe: give --plan or --recipe, not both")
        data = load_plan_file(plan_file)
        entries = [p for p in data["plans"] if isinstance(p, dict)]
        if len(entries) != len(data["plans"]):
            fail(f"plan file {plan_file!r} is malformed: every plan must be an object")
        if plan_model:
            entries = [p for p in entries if p.get("model") == plan_model]
            if not entries:
                fail(f"plan file {plan_file!r} has no plan for {plan_model!r}")
        if len(entries) != 1:
            fail(f"plan file {plan_file!r} holds {len(entries)} plans: choose one with --plan-model "
                 f"({', '.join(str(p.get('model', '?')) for p in data['plans'])})")
        plan_entry = entries[0]
        _check_plan_entry(plan_entry, plan_file)
        base = recipe_of_plan(plan_entry, f"plan {plan_file!r}")
    elif plan_model:
        fail("--plan-model chooses a plan of --plan; there is no --plan")
    elif recipe_file:
        base = Recipe.load(recipe_file)
    else:
        from flopplan.lengths import Length

        defaults = dict(TRAIN_DEFAULTS)
        defaults["completion_len"] = Length.fixed(int(defaults["completion_len"]))
        if recipe_opts.get("prompts_per_step") or recipe_opts.get("group_size"):
            defaults["micro_batch"] = None  # the default 64 fits only the default round of 16 x 16
        base = Recipe(**defaults)
    no_eval = recipe_opts.pop("no_eval", False)
    recipe = build_recipe_from(base, recipe_opts)
    if no_eval:
        recipe = recipe.with_(eval_every=None, eval_prompts=0)
    if model_name:
        recipe = recipe.with_(policy=model_name)
    if not (plan_file or recipe_file) and (model_path or (model_name and model_name != "tiny")) \
            and recipe_opts.get("lora_rank") is None and not recipe_opts.get("full_ft"):
        recipe = recipe.with_(lora_rank=Recipe().lora_rank)  # a real policy: LoRA unless --full says otherwise
    if plan_entry is not None and recipe != base:  # the run validates a changed recipe: the report says so
        import dataclasses

        changed = [f.name for f in dataclasses.fields(recipe) if getattr(recipe, f.name) != getattr(base, f.name)]
        plan_entry = {**plan_entry, "overridden": changed}
    if eval_dataset and not dataset:
        fail("--eval-dataset goes with --dataset (the built-in task makes its own held-out set)")
    budget_flops = _flop_budget_option(budget)
    if budget_flops is None and plan_entry is not None:
        planned_budget = plan_entry.get("budget")
        planned = planned_budget.get("flops") if isinstance(planned_budget, dict) else None
        if planned is None:
            fail("this plan has no FLOP budget (GPU-hours or dollars, or none): give --budget FLOPS")
        if isinstance(planned, bool) or not isinstance(planned, (int, float)) or not math.isfinite(planned) \
                or not 0 < planned <= BUDGET_LIMITS["flops"]:
            fail(f"plan file {plan_file!r}: its budget {planned!r} is not a positive number of FLOPs")
        budget_flops = int(planned)
    _steps_option(max_steps)
    return TrainConfig(recipe=recipe, out_dir=out_dir, budget_flops=budget_flops, max_steps=max_steps,
                       plan=plan_entry, task=task, dataset=dataset, eval_dataset=eval_dataset,
                       train_size=train_size, model_path=model_path, random_init=random_init, **knobs)


def _resume_config(out_dir: str) -> Any:

    from flopplan.fileio import read_json
    from flopplan.train.config import TrainConfig

    path = Path(out_dir) / "config.json"
    if not path.exists():
        fail(f"nothing to resume in {out_dir!r}: no config.json")
    data = read_json(path, "run config")
    if not isinstance(data, dict) or "recipe" not in data:
        fail(f"{str(path)!r} is not a flopplan run config")
    data.pop("flopplan_version", None)
    try:
        return TrainConfig.from_data(data)
    except TypeError as exc:
        fail(f"{str(path)!r} is not a flopplan run config ({exc})")


def _render_run(summary: dict[str, Any], out_dir: str) -> None:
    from flopplan.report.run_report import run_tables

    tables, notes = run_tables(summary)
    render_tables(tables, "table", notes, "", None)
    console().print(f"run folder: {out_dir} (flopplan report {out_dir})")


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False),
              help="Where to draw the curves (default RUN_DIR/report.png).")
@click.option("--no-plot", is_flag=True, help="Do not draw.")
def report(run_dir: str, as_json: bool, plot_file: str | None, no_plot: bool) -> None:
    """Summarise a training run: FLOPs by bucket vs budget vs plan, and reward/accuracy against FLOPs spent."""
    from flopplan.report.run_report import load_run, plot_run, run_tables

    summary, metrics = load_run(run_dir)
    path = None
    if not no_plot:
        path = plot_run(summary, metrics, plot_file or f"{run_dir}/report.png")
    if as_json:
        echo_json({**summary, "plot": path})
        return
    tables, notes = run_tables(summary)
    render_tables(tables, "table", notes + ([f"plot: {path}"] if path else []), "", None)


# -- calibrate --------------------------------------------------------------------------------------------------

@main.command()
@click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda"]))
@click.option("--models", "models", multiple=True, metavar="A,B",
              help="Models to sweep (default: tiny,cal-small with --quick on CPU; qwen2.5-0.5b on CPU; "
                   "qwen2.5-0.5b,qwen2.5-1.5b on GPU). With --verify: models to verify (default: the registry).")
@click.option("--quick", is_flag=True, help="A small sweep (CPU: tiny configs, under 2 minutes).")
@click.option("--verify", is_flag=True,
              help="Only check a GRPO step of every registry size on the meta device against the closed form.")
@click.option("--repeats", type=int, help="Timed repeats per point (median; default 4 quick, 5 otherwise).")
@click.option("--no-counters", is_flag=True, help="Skip the counters-side-by-side section.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Folder for profile.json, report.md and the plot (default calibration/<device>).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def calibrate(device: str, models: tuple[str, ...], quick: bool, verify: bool, repeats: int | None,
              no_counters: bool, out_dir: str | None, as_json: bool) -> None:
    """Prove the closed form against real counters and fit how fast each GRPO phase runs here."""
    names = [m.strip() for value in models for m in value.split(",") if m.strip()]
    if models and not names:
        fail("--models was given without a model name")
    if repeats is not None and repeats <= 0:
        fail(f"--repeats must be a positive integer, not {repeats}")
    try:
        import torch

        from flopplan.measure import calibrate as C
        from flopplan.measure import quiet_transformers
    except ImportError as exc:
        fail(f"flopplan calibrate needs the torch extra (pip install 'flopplan[torch]'): {exc}")
    quiet_transformers()
    from flopplan.arch import REGISTRY

    for name in names:  # unknown or unusable names fail here, before any work
        C.spec_named(name) if verify else C.sweepable(name)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    con = console()
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=con, disable=as_json or not sys.stdout.isatty(), transient=True)
    if verify:
        targets = names or list(REGISTRY)
        with progress:
            task = progress.add_task("verify", total=len(targets))
            rows = []
            for name in targets:
                progress.update(task, description=f"verify {name}")
                rows += C.verify([name])
                progress.advance(task)
        if as_json:
            echo_json({"exact": all(r["exact"] for r in rows), "rows": rows})
        else:
            from flopplan.report.calibration_report import verify_table

            exact = sum(r["exact"] for r in rows)
            render_tables([verify_table(rows)], "table", [f"{exact} of {len(rows)} phases exact"], "", None)
        if not all(r["exact"] for r in rows):
            sys.exit(1)
        return

    from flopplan.fileio import atomic_write_json, writable_folder
    from flopplan.report.calibration_report import counters_table, fit_table, write_report
    from flopplan.train.trainer import pick_device

    dev = pick_device(device)
    if not names:
        names = (["tiny", "cal-small"] if quick else ["qwen2.5-0.5b"]) if dev.type == "cpu" else \
            ["qwen2.5-0.5b", "qwen2.5-1.5b"]
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    from flopplan.measure.models import check_memory

    for name in names:  # before any sweep: not after an hour spent on the smaller models
        check_memory(C.spec_named(name), dev, dtype)
    if out_dir:  # an unusable folder fails now, not after the sweep
        writable_folder(out_dir, "calibration folder")
    reps = repeats or (4 if quick else 5)
    counters_rows = None
    with progress:
        if not no_counters:
            task = progress.add_task("counters side by side", total=None)
            counters_rows = C.compare_counters(C.spec_named(names[0]), dev, dtype,
                                               ("eager", "sdpa"))
            progress.remove_task(task)
        task = progress.add_task("sweep", total=1)

        def report(label: str, done: int, total: int) -> None:
            progress.update(task, description=f"sweep {label}", completed=done, total=total)

        measurements = C.sweep(names, dev, quick, reps, report)
    bytes_per_element = 2.0 if dev.type == "cuda" else 4.0
    fits = C.fit(measurements, bytes_per_element)
    profile = C.profile_data(dev, names, fits, measurements, quick, counters_rows)
    folder = Path(out_dir) if out_dir else Path("calibration") / _slug(profile["device"], quick)
    writable_folder(folder, "calibration folder")
    atomic_write_json(folder / "profile.json", profile)
    report_path = write_report(folder, profile, counters_rows, None, _command_line())
    if as_json:
        echo_json({"profile": str(folder / "profile.json"), "report": str(report_path), "fit": fits,
                   "counters": counters_rows})
        return
    tables = ([counters_table(counters_rows)] if counters_rows else []) + [fit_table(fits)]
    render_tables(tables, "table", [f"profile: {folder / 'profile.json'}", f"report: {report_path}",
                                    f"use it: flopplan plan --profile {folder / 'profile.json'} --budget 1e17"],
                  "", None)


def _slug(device: str, quick: bool) -> str:
    import re

    text = re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")[:48]
    return f"{text}{'-quick' if quick else ''}"


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
