"""``flopplan models``, ``estimate`` and ``formula``: the registry, one phase of one model, the closed form."""

from __future__ import annotations

import click

from flopplan.attention import ATTENTION_CONVENTIONS, ATTENTION_KERNELS, WINDOW_CONVENTIONS
from flopplan.cli import echo_json, fail, main
from flopplan.cli.options import CONVENTION_OPTIONS, check_conventions_apply
from flopplan.formulas import Conventions, LoRA
from flopplan.moe import EXPERTS_IMPLEMENTATIONS


@main.command()
@click.option("--context", default=4096, show_default=True, type=int,
              help="Sequence length at which forward FLOPs per token are stated.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def models(context: int, as_json: bool) -> None:
    """The model registry: parameters (active: per token, for mixture-of-experts models), sliding windows
    (window, and how many layers have it when not all do) and forward FLOPs per token."""
    from flopplan.arch import REGISTRY
    from flopplan.attention import sliding_layers
    from flopplan.estimate import check_within_cap
    from flopplan.formulas import forward_flops

    if context <= 0:
        fail(f"--context must be a positive integer, not {context}")
    rows = []
    for spec in REGISTRY.values():
        total = forward_flops(spec, 1, context, context).total
        check_within_cap(total, f"--context {context}: a forward of {spec.name}")
        sliding, _ = sliding_layers(spec)
        rows.append({"name": spec.name, "params": spec.params, "params_non_embedding": spec.params_non_embedding,
                     "params_active": spec.params_active, "moe": spec.moe is not None,
                     "sliding_window": spec.sliding_window, "sliding_layers": sliding, "layers": spec.num_layers,
                     "hidden": spec.hidden_size, "heads": spec.num_heads,
                     "kv_heads": spec.num_kv_heads, "vocab": spec.vocab_size, "tied": spec.tie_embeddings,
                     "head": spec.head.kind, "context": context, "forward_flops": total,
                     "forward_flops_per_token": total / context})
    if as_json:
        echo_json(rows)
        return
    from flopplan.report.console import models_table, print_tables

    print_tables([models_table(rows, context)])


def _lora_option(rank: int | None, targets: str | None) -> LoRA | None:
    if rank is None:
        if targets is not None:
            fail("--lora-targets needs --lora-rank")
        return None
    names = tuple(t.strip() for t in targets.split(",") if t.strip()) if targets is not None else None
    try:
        return LoRA(rank, names) if names is not None else LoRA(rank)
    except ValueError as exc:
        fail(str(exc))


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
@click.option("--attention", default="dense", show_default=True, type=click.Choice(ATTENTION_CONVENTIONS),
              help="dense: the full score matrix (FlopCounterMode); causal: the computed triangle only.")
@click.option("--attention-kernel", default="eager", show_default=True, type=click.Choice(ATTENTION_KERNELS),
              help="Attention backward as eager matmuls (2x forward) or fused SDPA/flash as counted on GPU (2.5x).")
@click.option("--experts", default="grouped_mm", show_default=True, type=click.Choice(EXPERTS_IMPLEMENTATIONS),
              help="MoE models: transformers' experts implementation (eager: no LoRA on the routed experts).")
@click.option("--window", default="masked", show_default=True, type=click.Choice(WINDOW_CONVENTIONS),
              help="Sliding-window models, in a prefill: masked (eager computes the full score matrix and masks it) "
                   "or windowed (a windowed SDPA/flash kernel: only the pairs within the window).")
@click.option("--terms", "all_terms", is_flag=True, help="List every term instead of the table by module.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def estimate(model_name: str, phase: str, batch: int, seq: int | None, context: int | None, prompt: int | None,
             completion: int | None, logits: str | None, lora_rank: int | None, lora_targets: str | None,
             grad_ckpt: bool, reentrant: bool, input_grads: bool | None, attention: str, attention_kernel: str,
             experts: str, window: str, all_terms: bool, as_json: bool) -> None:
    """Exact FLOPs of one phase of one model, by term."""
    from flopplan.arch import resolve
    from flopplan.estimate import EstimateRequest, result_json
    from flopplan.estimate import estimate as run_estimate

    if reentrant and not grad_ckpt:
        fail("--reentrant needs --grad-ckpt")
    if lora_rank is not None and lora_rank <= 0:
        fail(f"--lora-rank must be a positive integer, not {lora_rank}")
    spec = resolve(model_name)
    ctx = click.get_current_context()
    check_conventions_apply([name for name in CONVENTION_OPTIONS  # a value given, not the default
                             if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT], [spec])
    req = EstimateRequest(
        phase=phase, batch=batch, seq=seq, context=context, prompt=prompt, completion=completion, logits=logits,
        lora=_lora_option(lora_rank, lora_targets),
        checkpointing=("reentrant" if reentrant else "non-reentrant") if grad_ckpt else "none",
        input_grads=input_grads, conventions=Conventions(attention, attention_kernel, experts, window))
    terms = run_estimate(spec, req)
    data = result_json(spec, req, terms)
    if as_json:
        echo_json(data)
        return
    from flopplan.report.console import console, estimate_table, print_tables

    table, line = estimate_table(data, all_terms)
    print_tables([table])
    console().print(line)


@main.command()
@click.option("--phase", required=True, type=click.Choice(["forward", "decode", "generate", "train"]))
@click.option("--latex", is_flag=True, help="LaTeX instead of plain text.")
@click.option("--lora", is_flag=True, help="With LoRA adapters of rank r on all seven projections.")
@click.option("--grad-ckpt", is_flag=True, help="train: non-reentrant gradient checkpointing.")
@click.option("--attention", default="dense", show_default=True, type=click.Choice(ATTENTION_CONVENTIONS))
@click.option("--attention-kernel", default="eager", show_default=True, type=click.Choice(ATTENTION_KERNELS))
@click.option("--json", "as_json", is_flag=True, help="Print the terms and the total as JSON.")
def formula(phase: str, latex: bool, lora: bool, grad_ckpt: bool, attention: str, attention_kernel: str,
            as_json: bool) -> None:
    """The closed form of a phase, in symbols (from the same definitions as the integer counts)."""
    from flopplan.report.formula import formula_text

    if grad_ckpt and phase != "train":
        fail("--grad-ckpt applies to --phase train only")
    data = formula_text(phase, latex=latex, lora=lora, checkpointing="non-reentrant" if grad_ckpt else "none",
                        conv=Conventions(attention, attention_kernel))
    if as_json:
        echo_json(data)
        return
    click.echo(f"% {phase} FLOPs, attention {attention}, kernel {attention_kernel}"
               + (", LoRA" if lora else "") + (", gradient checkpointing" if grad_ckpt else ""))
    for key, value in data["components"].items():
        click.echo(f"{key} = {value}")
    click.echo(f"total = {data['total']}")
    click.echo("where " + "; ".join(f"{k}: {v}" for k, v in data["symbols"].items()))
