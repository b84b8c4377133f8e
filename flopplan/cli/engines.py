"""``flopplan plan --from-trl/--from-verl`` (price a run configured for an engine) and ``flopplan export trl|verl``
(a plan entry as that engine's configuration and launcher)."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path
from typing import Any

import click

from flopplan.cli import echo_json, fail, main
from flopplan.errors import UserError
from flopplan.fileio import atomic_write_text, read_text, writable_targets
from flopplan.hardware import DATASHEETS, Profile
from flopplan.recipe import Recipe

ENGINE_OPTIONS = ("prompt_len", "completion_len")
"""The recipe options an engine configuration leaves to the user: the lengths its data will have."""
COUNTING_OPTIONS = ("attention", "attention_kernel", "window", "experts")
"""flopplan's counting conventions, not the engine's settings: they apply to an engine configuration as to a
recipe, and an export's price-back command carries the plan's (an export priced under causal attention read back
under the default, 99.2 PFLOP for a 98 PFLOP budget: a held-out user)."""
TRL_OPTIONS = (*ENGINE_OPTIONS, "reward_overhead_tokens")
"""A TRL configuration's: the lengths, and the reward model's template tokens, which the data's form decides
(:data:`flopplan.engines.trl.REWARD_TEMPLATE`)."""


def read_config_file(path: str, what: str) -> dict[str, Any]:
    """A JSON or YAML file of an engine's configuration, as an object."""
    import yaml

    text = read_text(path, what)
    try:
        data = json.loads(text) if path.endswith(".json") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise UserError(f"{what} {path!r} is not valid {'JSON' if path.endswith('.json') else 'YAML'}: "
                        f"{str(exc).splitlines()[0]}") from None
    except RecursionError:  # nested deeper than Python's recursion limit
        raise UserError(f"{what} {path!r} nests too deeply to read") from None
    if not isinstance(data, dict):
        raise UserError(f"{what} {path!r} must hold an object of fields")
    return data


def read_trl_configs(paths: tuple[str, ...]) -> dict[str, Any]:
    """The TRL configuration of ``--from-trl`` files, merged: GRPOConfig fields (YAML, JSON such as
    ``GRPOConfig(...).to_dict()``, or a ``training_args.bin`` TRL saved, read with torch when it is installed) and
    flopplan's own keys (``export trl``'s flopplan.yaml); a key in two files is refused."""
    from flopplan.engines.trl import check_grpo_config, read_training_args

    merged: dict[str, Any] = {}
    for path in paths:
        data = read_training_args(path) if path.endswith(".bin") else read_config_file(path, "TRL configuration")
        check_grpo_config(data, f"TRL configuration {path!r}")
        twice = sorted(set(merged) & set(data))
        if twice:
            raise UserError(f"--from-trl files both set {twice[0]}: give each field once")
        merged.update(data)
    return merged


def engine_device(device: str | None) -> tuple[str, str | None]:
    """(``cpu`` | ``cuda``, the datasheet profile to time with): ``--device`` names a GPU (a datasheet) or cpu|cuda."""
    if device is None or device == "cuda":
        return "cuda", None
    if device == "cpu":
        return "cpu", None
    if device.lower() in DATASHEETS:
        return "cuda", device
    raise UserError(f"--device with an engine configuration: cpu, cuda, or one of {', '.join(DATASHEETS)}")


def recipe_of_engine_config(from_trl: tuple[str, ...], from_verl: str | None, recipe_file: str | None,
                            models: tuple[str, ...], recipe_opts: dict[str, Any], steps: int | None,
                            world_size: int | None, device: str | None, budget_given: bool,
                            profile: Profile | None = None) -> tuple[Recipe, int | None, list[str], str | None]:
    """The recipe an engine's configuration runs, the steps (rounds) to price, notes, and the profile device;
    ``profile`` (a ``--profile`` file's) says where the run is timed, a CPU's or a GPU's, as ``--device`` does."""
    from flopplan.cli.options import recipe_changes, recipe_option_fields

    if from_trl and from_verl:
        fail("give --from-trl or --from-verl, not both")
    if recipe_file:
        fail("an engine configuration carries the recipe: give --from-trl/--from-verl or --recipe, not both")
    changes, _ = recipe_changes(recipe_opts)
    others = sorted(set(changes) - set(TRL_OPTIONS if from_trl else ENGINE_OPTIONS) - set(COUNTING_OPTIONS))
    if others:
        flag = next(f.metadata["option"] for f in recipe_option_fields() if f.name == others[0])
        fail(f"the engine configuration sets the recipe; of its options only --prompt-len and --completion-len"
             f"{' (and --reward-overhead for TRL)' if from_trl else ''} and the counting conventions (--attention, "
             f"--attention-kernel, --window, --experts) apply, not {flag}")
    counting = {key: changes[key] for key in COUNTING_OPTIONS if key in changes}
    model = models[0] if models else None
    if len(models) > 1:
        fail("an engine configuration trains one policy: give one --model")
    target, profile_device = engine_device(device)
    if profile is not None:
        target = "cpu" if profile.on_cpu else "cuda"
    if from_trl:
        from flopplan.engines.trl import GRPO_DEFAULTS, REWARD_TEMPLATE, recipe_from_trl, rounds_of

        data = read_trl_configs(from_trl)
        if data.get("use_cpu") is True:  # TRL (accelerate) then runs on the CPU, whatever GPU the machine has
            if device is not None and target != "cpu":
                fail(f"the TRL configuration sets use_cpu: its run is on the CPU, not --device {device}: give "
                     "--device cpu, or price the run without use_cpu")
            if profile is not None and not profile.on_cpu:
                fail(f"the TRL configuration sets use_cpu: its run is on the CPU, not on the --profile's "
                     f"{profile.device!r}: give a CPU's profile (flopplan calibrate on the CPU), or price the run "
                     "without use_cpu")
            target = "cpu"
        recipe, run, notes = recipe_from_trl(data, model=model, prompt_len=changes.get("prompt_len"),
                                             completion_len=changes.get("completion_len"),
                                             world_size=1 if world_size is None else world_size,
                                             device=target)
        recipe = recipe.with_(**counting) if counting else recipe
        if "reward_overhead_tokens" in changes and recipe.reward.kind == "rule":
            fail("--reward-overhead applies to a reward model (a model's name or path in reward_funcs), not a rule")
        if "reward_overhead_tokens" in changes:  # the user states their data's template
            recipe = recipe.with_(reward_overhead_tokens=changes["reward_overhead_tokens"])
        elif recipe.reward.kind == "orm" and "reward_overhead_tokens" not in data:
            notes.append(f"the reward model is priced reading prompt + completion alone: {REWARD_TEMPLATE}; for "
                         "conversational data give --reward-overhead N, the template's tokens")
        notes.append(f"TRL: {run.bs} completions per device x {run.world} process{'es' if run.world > 1 else ''} x "
                     f"{run.spg} micro-steps = {run.rollouts} rollouts a round (a flopplan step); "
                     f"{run.optimizer_steps_per_round} optimizer step{'s' if run.optimizer_steps_per_round > 1 else ''}"
                     f" a round; log-prob head {recipe.logprob_head} ({target})")
        rounds = rounds_of(run, data.get("max_steps"))
        if rounds is None and steps is None:  # TRL runs num_train_epochs over data flopplan has not read
            epochs = data.get("num_train_epochs", GRPO_DEFAULTS["num_train_epochs"])
            notes.append(f"max_steps is not set: TRL stops after num_train_epochs ({epochs}) epochs of the training "
                         f"data, whose rows flopplan has not read (an epoch of R prompts is floor(R / "
                         f"{run.rollouts // run.generations}) rounds); this prices what the budget buys instead: give "
                         "--steps N for N rounds, or set max_steps")
    else:
        if world_size is not None:
            fail("--world-size goes with --from-trl (a verl configuration names its GPUs)")
        from flopplan.engines.verl import recipe_from_verl, verl_mfu_estimate

        assert from_verl is not None
        notes = []
        recipe, rounds = recipe_from_verl(from_verl, model=model, prompt_len=changes.get("prompt_len"),
                                          completion_len=changes.get("completion_len"), notes=notes)
        recipe = recipe.with_(**counting) if counting else recipe
        verl = verl_mfu_estimate(recipe)
        if verl["verl_update_flops"] is None:
            notes.append(f"verl's MFU formula for model_type {verl['model_type']} (utils/flops_counter.py) is not "
                         "one flopplan reproduces")
        elif not verl["verl_update_flops"]:
            notes.append(f"verl's MFU formula has no entry for model_type {verl['model_type']} (utils/flops_counter.py"
                         ":678-701): verl counts 0 FLOPs and reports an MFU of 0")
        else:
            notes.append(f"verl's MFU formula (utils/flops_counter.py) counts {verl['verl_update_flops']:,.0f} FLOPs "
                         f"a step: {verl['update_rel_diff']:+.1%} against the exact update, "
                         f"{verl['step_rel_diff']:+.1%} against the whole step (it leaves out rollouts, log-prob "
                         "passes, the reward model, LoRA and recompute)")
    if steps is None and not budget_given and rounds is not None:
        steps = rounds  # the run as configured
        notes.append(f"priced as configured: {rounds} rounds")
    elif steps is None and not budget_given and from_verl:  # verl runs total_epochs over the data
        notes.append("trainer.total_training_steps is not set: verl runs trainer.total_epochs x the dataset's "
                     "batches (trainer/ppo/v1/trainer_base.py:768), which flopplan cannot see; this prices the "
                     "budget instead (give --steps N for N steps)")
    return recipe, steps, notes, profile_device


@main.group()
def export() -> None:
    """A plan entry as an engine's configuration and launcher (TRL's GRPOTrainer, verl)."""


@export.command("trl")
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.option("--plan-model", help="Which model's plan to export when the plan file holds several.")
@click.option("--world-size", default=1, show_default=True, type=int, help="Processes (GPUs) the run uses.")
@click.option("--out", "out_dir", default="trl-run", show_default=True, type=click.Path(file_okay=False),
              help="Folder for grpo_config.yaml, flopplan.yaml and the launcher.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def export_trl(plan_file: str, plan_model: str | None, world_size: int, out_dir: str, as_json: bool) -> None:
    """GRPOConfig fields (grpo_config.yaml: GRPOConfig(**fields) and TrlParser load it as it is), flopplan's own keys
    (flopplan.yaml: the policy, the LoraConfig fields, the reward functions) and a launcher that trains the plan on
    TRL with flopplan's FLOP meter. plan --from-trl grpo_config.yaml --from-trl flopplan.yaml prices them."""
    import yaml

    from flopplan.engines.trl import EXTRA_KEYS, REWARD_TEMPLATE, TESTED_TRL, check_export_head, grpo_config_kwargs
    from flopplan.planfile import PlanFile

    entry = PlanFile.load(plan_file).select(plan_model)
    entry.check_priced_as_written(plan_file)
    check_export_head(entry.recipe)
    kwargs = grpo_config_kwargs(entry.recipe, world_size=world_size, steps=entry.steps if entry.priced else None)
    own = {"model_name_or_path": entry.recipe.policy, **{k: kwargs.pop(k) for k in EXTRA_KEYS if k in kwargs}}
    folder = Path(out_dir)
    writable_targets(*(folder / name for name in ("grpo_config.yaml", "flopplan.yaml", "train_trl.sh")))
    header = f"# {entry.model}: {entry.steps} rounds of the plan {plan_file} (flopplan export trl; trl {TESTED_TRL})\n"
    config_path = atomic_write_text(folder / "grpo_config.yaml", header + yaml.safe_dump(kwargs, sort_keys=False))
    own_path = atomic_write_text(folder / "flopplan.yaml", header + "# flopplan's keys beside GRPOConfig's: the policy,"
                                 " peft (LoraConfig fields), reward_funcs, the reward model's template tokens\n"
                                 + yaml.safe_dump(own, sort_keys=False))
    launcher = atomic_write_text(folder / "train_trl.sh", _trl_launcher(plan_file, entry.model, world_size))
    launcher.chmod(0o755)
    command = (f"accelerate launch --num_processes {world_size} -m flopplan train --engine trl --plan "
               f"{plan_file} --plan-model {entry.model} --model-path MODEL_DIR --dataset DATA.jsonl --out RUN "
               "--no-eval")
    notes = [f"the plan charges each reward call {own['reward_overhead_tokens']} template tokens "
             f"(reward_overhead_tokens in flopplan.yaml): {REWARD_TEMPLATE}; for plain-text data plan with "
             "--reward-overhead 0"] if own.get("reward_overhead_tokens") else []
    if counting := _counting_flags(entry.recipe):  # (read back under the defaults, the price differed unnamed)
        notes.append(f"the plan counted with{counting}: give them to plan --from-trl {shlex.quote(str(config_path))} "
                     f"--from-trl {shlex.quote(str(own_path))} to price these files as the plan did")
    if as_json:
        echo_json({"grpo_config": str(config_path), "flopplan_config": str(own_path), "launcher": str(launcher),
                   "command": command, "config": kwargs, "flopplan": own, "notes": notes})
        return
    click.echo(f"wrote {config_path}\nwrote {own_path}\nwrote {launcher}\nrun on {world_size} "
               f"GPU{'s' if world_size > 1 else ''}:\n  {command}")
    for note in notes:
        click.echo(f"note: {note}")


def _trl_launcher(plan_file: str, model: str, world_size: int) -> str:
    return f"""#!/usr/bin/env bash
# Train the plan {plan_file} ({model}) on TRL's GRPOTrainer with flopplan's FLOP meter: every round charged to
# the ledger in RUN, the run stopped before a round that could overrun the plan's budget, checkpoints in RUN/trl.
# Written by `flopplan export trl`. Usage: train_trl.sh MODEL_DIR DATA.jsonl RUN  (JSONL of prompt and answer)
set -euo pipefail
model=${{1:?a local model folder}} data=${{2:?a JSONL dataset of prompt and answer}} run=${{3:?a run folder}}
exec accelerate launch --num_processes {world_size} -m flopplan train --engine trl --plan {plan_file} \\
  --plan-model {model} --model-path "$model" --dataset "$data" --out "$run" --no-eval --no-progress
"""


@export.command("verl")
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.option("--plan-model", help="Which model's plan to export when the plan file holds several.")
@click.option("--gpus-per-node", default=8, show_default=True, type=int, help="trainer.n_gpus_per_node.")
@click.option("--nnodes", default=1, show_default=True, type=int, help="trainer.nnodes.")
@click.option("--model-path", help="actor_rollout_ref.model.path (default: the registry model's HF repository).")
@click.option("--rollout", default="vllm", show_default=True, type=click.Choice(["vllm", "sglang"]),
              help="actor_rollout_ref.rollout.name.")
@click.option("--reward-function", help="reward.custom_reward_function.path of a rule reward (a Python file).")
@click.option("--reward-model-path", help="reward.reward_model.model_path of an ORM (default: its HF repository).")
@click.option("--out", "out_dir", default="verl-run", show_default=True, type=click.Path(file_okay=False),
              help="Folder for overrides.txt and run_verl.sh.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
def export_verl(plan_file: str, plan_model: str | None, gpus_per_node: int, nnodes: int, model_path: str | None,
                rollout: str, reward_function: str | None, reward_model_path: str | None, out_dir: str,
                as_json: bool) -> None:
    """verl Hydra overrides and a launch script (python3 -m verl.trainer.main_ppo) for a plan entry; verl's
    conventions (vLLM rollouts, the head on every token, packed updates) are applied and named."""
    from flopplan.engines.hydra import format_override
    from flopplan.engines.verl import VERL_VERSION, launch_script, verl_overrides, verl_recipe
    from flopplan.planfile import PlanFile

    entry = PlanFile.load(plan_file).select(plan_model)
    entry.check_priced_as_written(plan_file)
    if entry.steps < 1:
        fail(f"the plan of {entry.model} buys no step: nothing to export")
    notes: list[str] = []
    recipe = verl_recipe(entry.recipe, notes)
    steps = _verl_steps(entry, recipe, notes)
    overrides = verl_overrides(recipe, steps=steps, gpus_per_node=gpus_per_node, nnodes=nnodes,
                               model_path=model_path, rollout=rollout, reward_function=reward_function,
                               reward_model_path=reward_model_path, notes=notes)
    folder = Path(out_dir)
    writable_targets(folder / "overrides.txt", folder / "run_verl.sh")
    flags = _length_flags(recipe, notes)  # verl's config holds only the maxima: the plan's lengths go as flags
    # a --model-path flopplan may not read (a folder on the training machine): the command names the model
    model = f" --model {shlex.quote(recipe.policy)}" if model_path else ""
    check = f"flopplan plan --from-verl {shlex.quote(str(folder / 'overrides.txt'))}{model}{flags}" \
        f"{_counting_flags(recipe)}"
    header = (f"# {entry.model}: {steps} steps of the plan {plan_file} as verl {VERL_VERSION} overrides "
              f"(flopplan export verl); price them with {check}\n")
    listing = atomic_write_text(folder / "overrides.txt", header + "".join(
        shlex.quote(format_override(k, v)) + "\n" for k, v in overrides.items()))
    script = atomic_write_text(folder / "run_verl.sh", launch_script(overrides, generated_by="flopplan export verl"))
    script.chmod(0o755)
    if recipe != entry.recipe or flags:
        notes.append(f"{'the plan priced its own conventions: ' if recipe != entry.recipe else ''}{check} prices the "
                     "run as verl will execute it")
    if as_json:
        echo_json({"overrides_file": str(listing), "launcher": str(script), "overrides": overrides, "notes": notes,
                   "price_command": check})
        return
    click.echo(f"wrote {listing}\nwrote {script}\nrun on {gpus_per_node * nnodes} GPUs: bash {script}")
    for note in notes:
        click.echo(f"note: {note}")


def _counting_flags(recipe: Recipe) -> str:
    """The plan's counting conventions that are not the default, as the options that give them
    (:data:`COUNTING_OPTIONS`)."""
    from flopplan.cli.options import recipe_option_fields

    defaults = {f.name: f.default for f in dataclasses.fields(Recipe)}
    return "".join(f" {field.metadata['option']} {shlex.quote(str(getattr(recipe, field.name)))}"
                   for field in recipe_option_fields() if field.name in COUNTING_OPTIONS
                   and getattr(recipe, field.name) != defaults.get(field.name))


def _length_flags(recipe: Recipe, notes: list[str]) -> str:
    """``--prompt-len``/``--completion-len`` for the lengths a plan priced below the maxima the config holds (a
    --from-verl plan defaults to the maxima); a length with no flag form is noted."""
    flags = ""
    for flag, length in (("--prompt-len", recipe.prompt_len), ("--completion-len", recipe.completion_len)):
        if length.is_fixed:
            continue
        if (spec := length.spec()) == length.describe():
            notes.append(f"{flag}: the plan's lengths ({spec}) have no flag form; give them as {flag} @FILE")
        else:
            flags += f" {flag} {shlex.quote(spec)}"
    return flags


def _verl_steps(entry: Any, recipe: Recipe, notes: list[str]) -> int:
    """The steps to export: a plan for a budget keeps its budget (verl's conventions may cost more a step, so
    fewer steps fit); a plan priced for N steps keeps N, and the note says what they cost under verl."""
    from flopplan.budget import Budget
    from flopplan.cost import step_cost
    from flopplan.units import eng

    if recipe == entry.recipe:
        return int(entry.steps)
    cost = int(step_cost(recipe).step_flops)
    timed = entry.budget is not None and entry.budget.flops is None and entry.profile is not None  # hours, dollars
    if entry.priced or (entry.budget_flops is None and not timed):
        notes.append(f"under verl's conventions the {entry.steps} steps cost {eng(cost * entry.steps)} "
                     f"({cost / entry.step_flops - 1:+.1%} a step)")
        return int(entry.steps)
    from flopplan.hardware import profile_from_data
    from flopplan.planner import plan

    # a budget in GPU-hours or dollars is re-solved on the plan's own profile (it kept the plan's steps, 114.5 of a
    # 100 GPU-hour budget under verl's conventions: a held-out user)
    budget = entry.budget if timed else Budget(flops=float(entry.budget_flops))
    profile = profile_from_data(entry.profile, "the plan's profile") if timed else None
    steps = plan(recipe, budget, profile).steps
    what = budget.describe() if timed else eng(entry.budget_flops)
    if steps < 1:
        fail(f"under verl's conventions one step of {entry.model} costs {eng(cost)}: the plan's budget ({what}) "
             "buys none")
    if steps != entry.steps:
        notes.append(f"verl's conventions cost {cost / entry.step_flops - 1:+.1%} a step: {steps} steps fit the "
                     f"plan's budget of {what} (the plan had {entry.steps})")
    return int(steps)
