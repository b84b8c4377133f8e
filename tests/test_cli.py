"""The command line: bad input is one line and exit code 2, what cannot work is refused before any work; no torch;
train's options and the defaults its help states; names the terminal cannot show (estimate: test_estimate.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from helpers import ROOT, TINY, cli, one_line_error

from flopplan.arch import REGISTRY
from flopplan.errors import UserError

run = cli  # every command below runs in this process; the no-torch checks need a fresh one


NO_TORCH = """
import sys
sys.argv = ["flopplan", *{args!r}]
from flopplan.cli import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
assert "torch" not in sys.modules, "torch was imported"
"""


@pytest.mark.parametrize("args", [[], ["--help"], ["models"], ["models", "--json"],
                                  ["estimate", "--model", "qwen2.5-7b", "--phase", "train", "--seq", "64",
                                   "--lora-rank", "8", "--grad-ckpt"],
                                  ["formula", "--phase", "generate", "--latex"]])
def test_core_commands_do_not_import_torch(args):
    code = "import flopplan" if not args else NO_TORCH.format(args=args)
    if not args:
        code += "\nimport sys\nassert 'torch' not in sys.modules"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_models_json_lists_the_registry():
    out = run("models", "--json")
    rows = json.loads(out.stdout)
    assert [row["name"] for row in rows] == list(REGISTRY)
    for row in rows:
        assert row["params"] == REGISTRY[row["name"]].params
        assert row["params_non_embedding"] == REGISTRY[row["name"]].params_non_embedding


def test_models_table_states_its_context():
    out = run("models", "--context", "2048")
    assert out.returncode == 0
    assert "2048 tokens" in out.stdout and "qwen2.5-72b" in out.stdout


BAD = {
    "unknown command": ["frobnicate"],
    "models bad context": ["models", "--context", "0"],
}
# what the user typed, quoted back: a huge exponent is refused before it is expanded into an integer (1e999999999
# hung), and one too small for a float is not "0.0"
QUOTED = {
    "huge budget (plan)": (["plan", "--model", "qwen2.5-0.5b", "--budget", "1e400000"], "'1e400000'"),
    "huge budget (train)": (["train", "--model", "qwen2.5-0.5b", "--budget", "1e999999999"], "at most 1e30"),
    "huge threshold (train)": (["train", "--eval-at-flops", "1e999999999"], "'1e999999999'"),
    "huge budget (race)": (["race", "design", "--budget", "1e999999999", "--out", "NEW"], "'1e999999999'"),
    "tiny budget": (["plan", "--model", "qwen2.5-0.5b", "--budget", "1e-99999999"], "'1e-99999999'"),
}


@pytest.mark.parametrize("case", sorted(QUOTED))
def test_a_number_out_of_range_is_quoted_as_typed(tmp_path, case):
    args, fragment = QUOTED[case]
    one_line_error(run(*[str(tmp_path / "race") if a == "NEW" else a for a in args]), fragment)


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_exit_2(case):
    one_line_error(run(*BAD[case]))


def test_formula_prints_latex():
    out = run("formula", "--phase", "decode", "--latex")
    assert out.returncode == 0
    assert "n_{q}" in out.stdout and "total" in out.stdout


# -- flopplan train's options: one per TrainConfig field -------------------------------------------------------

TRAIN_FLAGS = {  # what users type (README, RACE's pilot command): each keeps its name
    "--out", "--plan", "--plan-model", "--budget", "--steps", "--model", "--model-path", "--random-init", "--task",
    "--dataset", "--eval-dataset", "--train-size", "--recipe", "--engine", "--lr", "--lora-alpha", "--temperature",
    "--clip-eps", "--clip-eps-high", "--scale-rewards", "--loss-aggregation", "--max-grad-norm", "--weight-decay",
    "--seed", "--checkpoint-every", "--keep-checkpoints", "--resume", "--measure-flops", "--device",
    "--format-reward", "--reward-model-path", "--prm-aggregate", "--reward-output", "--eval-at-end",
    "--lost-outside-budget", "--no-eval", "--eval-targets", "--eval-at-flops", "--fixed-completion-len",
    "--no-progress", "--json"}


def _train_leaves(cls=None, prefix=""):
    """(dest, field, default) of every leaf field of TrainConfig (nested groups walked), from the dataclass;
    default MISSING when the field has none."""
    import dataclasses
    import typing

    from flopplan.train.config import TrainConfig

    cls = cls or TrainConfig
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in ("recipe", "plan", "work_dir"):  # the recipe's own options and --plan/--plan-model fill the
            continue  # first two; the folder a run started in is recorded, not chosen
        if dataclasses.is_dataclass(hints[f.name]):
            yield from _train_leaves(hints[f.name], f"{prefix}{f.name}_")
            continue
        yield prefix + f.name, f, f.default if f.default_factory is dataclasses.MISSING else f.default_factory()


def test_every_train_config_field_has_exactly_one_option_showing_its_default():
    import dataclasses

    from flopplan.cli.train import train

    params = [p for p in train.params if isinstance(p, click.Option)]
    names = [p.name for p in params]
    assert len(names) == len(set(names)), "two options fill the same value"
    flags = [o for p in params for o in p.opts]
    assert len(flags) == len(set(flags))
    assert set(flags) >= TRAIN_FLAGS, TRAIN_FLAGS - set(flags)
    by_name = {p.name: p for p in params}
    for dest, f, default in _train_leaves():
        assert dest in by_name, f"TrainConfig.{f.name} has no option"
        param = by_name[dest]
        assert param.opts[0] == f.metadata["option"]
        assert param.required is (default is dataclasses.MISSING)
        if default is dataclasses.MISSING:
            continue
        if f.metadata["kind"] in ("flag", "negated"):
            shown = "off"
        elif isinstance(default, tuple):
            shown = ",".join(map(str, default)) or "none"
        else:
            shown = None if default is None else str(default)
        if shown is not None:
            assert param.help.endswith(f"(default: {shown}).")
        else:  # None: the help says what happens without the option
            assert "None" not in param.help


def _train_values(*args):
    from flopplan.cli import main
    from flopplan.cli.options import dataclass_values
    from flopplan.cli.train import train
    from flopplan.train.config import TrainConfig

    # under flopplan's own context, whose help names (-h, --help) train inherits: click caches a command's help
    # option the first time it is asked for, and a bare context would cache --help alone for the rest of the process
    parent = click.Context(main, info_name="flopplan", **main.context_settings)
    params = train.make_context("train", list(args), parent=parent).params
    return dataclass_values(TrainConfig, params)


def test_train_options_keep_their_defaults_and_meaning():
    from flopplan.train.config import TrainLoss

    values = _train_values("--out", "run")
    # the defaults the options had when they were written out one by one
    assert values == {
        "out_dir": "run", "budget_flops": None, "max_steps": None, "model_path": None, "random_init": False,
        "task": "digits", "dataset": None, "eval_dataset": None, "train_size": 20000, "engine": "builtin",
        "lr": None, "lora_alpha": None, "temperature": 1.0, "loss": TrainLoss(0.2, None, "group", "token"),
        "max_grad_norm": 1.0, "weight_decay": 0.0, "seed": 0, "checkpoint_every": 10, "keep_checkpoints": 3,
        "measure_flops": False, "device": "auto", "report_to": "none", "threads": None, "format_reward": 0.0,
            "reward_model_path": None,
        "prm_aggregate": "min", "reward_output": "auto", "eval_targets": ("heldout",), "eval_at_flops": (),
        "eval_at_end": False, "charge_lost": True, "fixed_completion": False, "chat_template": None,
        "system_prompt": None, "reward_funcs": ("exact",), "reward_weights": None, "train_flops": None}
    assert values["loss"].upper_clip == 0.2  # --clip-eps-high defaults to --clip-eps
    given = _train_values("--out", "run", "--budget", "1e12", "--steps", "3", "--clip-eps", "0.1",
                          "--clip-eps-high", "0.28", "--loss-aggregation", "sequence", "--scale-rewards", "none",
                          "--lost-outside-budget", "--eval-targets", "heldout,long", "--eval-at-flops", "3e9,1e9",
                          "--fixed-completion-len", "--engine", "trl", "--reward-func", "exact", "--reward-func",
                          "math", "--reward-weights", "1,0.5", "--train-flops", "5e9")
    assert given["loss"] == TrainLoss(0.1, 0.28, "none", "sequence")
    assert (given["budget_flops"], given["max_steps"], given["charge_lost"]) == (10**12, 3, False)
    assert given["eval_targets"] == ("heldout", "long") and given["eval_at_flops"] == (10**9, 3 * 10**9)
    assert given["fixed_completion"] is True and given["engine"] == "trl"
    assert given["reward_funcs"] == ("exact", "math") and given["reward_weights"] == (1.0, 0.5)
    assert given["train_flops"] == 5 * 10**9
    assert _train_values("--out", "run", "--clip-eps", "0.3")["loss"].upper_clip == 0.3


FLAT_CONFIG = Path(__file__).parent / "data" / "run-config-flat.json"
"""A run folder's config.json as flopplan wrote it before the loss knobs were nested (commit 2f75877)."""


def test_a_run_config_of_the_flat_layout_still_loads(tmp_path):
    from flopplan.train.config import TrainConfig, TrainLoss, replace_config
    from flopplan.train.runfolder import RunFolder

    (tmp_path / "config.json").write_text(FLAT_CONFIG.read_text())
    folder = RunFolder(tmp_path)
    config = folder.read_config()
    assert config.loss == TrainLoss(0.15, 0.28, "none", "sequence")
    assert config.loss_config.clip_high == 0.28 and config.loss_config.temperature == 0.9
    assert config.charge_lost is False and config.eval_targets == ("heldout", "long")
    assert (config.budget_flops, config.max_steps, config.threads, config.seed) == (10**12, 7, 1, 3)
    # written again, the loss knobs are one table; read back, the same configuration
    folder.write_config(replace_config(config, max_steps=9))
    stored = json.loads((tmp_path / "config.json").read_text())
    assert stored["loss"] == {"clip_low": 0.15, "clip_high": 0.28, "scale_rewards": "none",
                              "aggregation": "sequence"}
    assert not {"clip_low", "clip_high", "scale_rewards", "loss_aggregation"} & set(stored)
    assert folder.read_config() == replace_config(config, max_steps=9)
    # the two layouts at once, or a key the loss does not have: refused as data, not a traceback
    data = json.loads(FLAT_CONFIG.read_text())
    for bad in ({**data, "loss": {"clip_low": 0.1}}, {**data, "clip_low": None, "loss": None},
                {**{k: v for k, v in data.items() if k != "clip_low"}, "loss": {"epsilon": 0.1}}):
        bad.pop("flopplan_version"), bad.pop("flopplan_run_version")
        with pytest.raises(UserError):
            TrainConfig.from_data({k: v for k, v in bad.items() if v is not None or k != "clip_low"})


def test_a_run_config_of_an_unknown_run_version_is_refused(tmp_path):
    from flopplan.train.runfolder import RunFolder

    data = json.loads(FLAT_CONFIG.read_text())
    for version in (99, "1", None):
        (tmp_path / "config.json").write_text(json.dumps({**data, "flopplan_run_version": version}))
        with pytest.raises(UserError, match="flopplan_run_version must be the integer 1"):
            RunFolder(tmp_path).read_config()
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({**data, "flopplan_run_version": 99}))
    one_line_error(cli("train", "--out", str(run), "--resume"), "flopplan_run_version")


@pytest.mark.parametrize("args", [
    ["plan", "--model", "qwen2.5-0.5b", "--from-verl", ""], ["plan", "--recipe", ""], ["plan", "--out", ""],
    ["plan", "--save-recipe", ""], ["plan", "--profile", ""], ["train", "--model", ""],
    ["race", "design", "--budget", "1e12", "--out", "r", "--models", ""],
    ["export", "verl", "plan.json", "--model-path", ""],
    ["report", ""], ["report", "run", "--plot", ""], ["compare", "--models", ""]], ids=" ".join)
def test_an_empty_name_or_path_given_is_refused_not_taken_as_absent(args):
    option = next((a for a in reversed(args) if a.startswith("--")), "RUN_DIR")
    one_line_error(cli(*args), f"{option}: an empty value names nothing")


# -- refuse what cannot work, before working --------------------------------------------------------------------

REFUSED = {
    "old logprobs off with mu 2 (plan)": (["plan", "--old-logprobs", "off", "--mu", "2"], "clip never acts"),
    "a share the free value cannot move": (["plan", "--target-learning-share", "0.5", "--solve", "group_size"],
                                           "does not depend on group_size"),
    "prm steps with a rule reward": (["plan", "--prm-steps", "4"], "--prm-steps"),
    "reward overhead with a rule": (["plan", "--reward-overhead", "4"], "--reward-overhead"),
    "eval length without evaluation": (["plan", "--eval-completion-len", "4"], "--eval-completion-len"),
    "eval batch without evaluation": (["plan", "--eval-batch", "4"], "eval_batch"),
    "a LoRA rank beyond the width": (["plan", "--model", "qwen2.5-0.5b", "--lora-rank", "100000"], "width"),
    "verify with quick": (["calibrate", "--verify", "--quick"], "--quick"),
    "verify with out": (["calibrate", "--verify", "--out", "x"], "--out"),
    "save one recipe of several": (["plan", "--save-recipe", "r.toml"], "one --model"),
    "prompt length of a run": (["train", "--out", "RUN", "--prompt-len", "9", "--steps", "1"], "task or dataset"),
    "tables outside the repository": (["tables", "--check", "--out", "NOWHERE"], "none of flopplan's tables"),
    "a version as text": (["train", "--out", "RUN", "--plan", "TEXT_VERSION"], "the integer 1"),
    "a plan file without plans": (["train", "--out", "RUN", "--plan", "NO_PLANS"], "holds no plans"),
    "a task with a dataset": (["train", "--out", "RUN", "--steps", "1", "--no-eval", "--dataset", "DATA", "--task",
                               "digits:sum"], "--task and --dataset contradict each other"),  # (the task was ignored)
    "a task size with a dataset": (["train", "--out", "RUN", "--steps", "1", "--no-eval", "--dataset", "DATA",
                                    "--train-size", "100"], "--train-size and --dataset contradict each other"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_cannot_work_is_refused(tmp_path, case):
    args, fragment = REFUSED[case]
    (tmp_path / "text.json").write_text(json.dumps({"flopplan_plan_version": "1", "plans": []}))
    (tmp_path / "none.json").write_text(json.dumps({"flopplan_plan_version": 1, "plans": []}))
    (tmp_path / "data.jsonl").write_text(json.dumps({"prompt": "1 2 3", "answer": "1"}) + "\n")
    swap = {"RUN": str(tmp_path / "run"), "NOWHERE": str(tmp_path / "nowhere"), "r.toml": str(tmp_path / "r.toml"),
            "TEXT_VERSION": str(tmp_path / "text.json"), "NO_PLANS": str(tmp_path / "none.json"),
            "DATA": str(tmp_path / "data.jsonl")}
    one_line_error(cli(*[swap.get(a, a) for a in args]), fragment)


# -- the defaults train's help states; names the terminal cannot show -------------------------------------------

def test_train_help_states_the_training_defaults():
    """Each option's own entry in ``train --help`` states the training's default (not the planner's G=8)."""
    from flopplan.cli import main
    from flopplan.cli.train import train

    printed = " ".join(cli("train", "--help").stdout.split())
    context = click.Context(train, info_name="train", parent=click.Context(main, **main.context_settings))
    records = {p.opts[0]: p.get_help_record(context) for p in train.params if isinstance(p, click.Option)}
    entries = {option: " ".join(record[1].split()) for option, record in records.items() if record}
    for option, label, default in (("--group-size", "Completions per prompt, G", 16),
                                   ("--prompts-per-step", "Prompts per GRPO step", 16),
                                   ("--completion-len", "", 2)):
        entry = entries[option]
        assert entry.startswith(label) and entry.endswith(f"(default: {default}).") and entry in printed, option
    assert "--keep-checkpoints" in entries and "--keep-checkpoints" in printed
    assert "(default: 8)" not in entries["--group-size"]


def test_train_help_says_what_a_micro_batch_is_and_which_default_a_run_gets(tmp_path):
    """train --help said "--micro-batch: Sequences per scoring/update forward (default: 64)": 64 is the demo round's
    (16 x 16), a run given --prompts-per-step or --group-size gets G; nor did it say how micro-batches sit in the
    generation and optimizer batches (gradient accumulation)."""
    from flopplan.cli import main
    from flopplan.cli.train import train
    from flopplan.train.config import train_config

    context = click.Context(train, info_name="train", parent=click.Context(main, **main.context_settings))
    record = next(p.get_help_record(context) for p in train.params if p.opts[0] == "--micro-batch")
    entry = " ".join(record[1].split())
    assert "--generation-batch" in entry and "--optimizer-batch / micro-batch" in entry, entry
    assert entry.endswith("(default: 64, the demo's 16 x 16 round; G once --prompts-per-step or --group-size is "
                          "given)."), entry
    out = str(tmp_path / "run")
    assert train_config(out, max_steps=1).recipe.micro_batch_size == 64
    assert train_config(out, max_steps=1, changes={"group_size": 4}).recipe.micro_batch_size == 4
    assert train_config(out, max_steps=1, changes={"prompts_per_step": 2}).recipe.micro_batch_size == 16


def test_a_name_the_terminal_cannot_show_is_escaped(tmp_path):
    env = dict(os.environ, PYTHONIOENCODING="ascii")
    out = subprocess.run([sys.executable, "-m", "flopplan", *TINY, "--out", str(tmp_path / "ü.json")],
                         capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0 and "\\xfc.json" in out.stdout and (tmp_path / "ü.json").exists()


def test_an_os_error_no_check_caught_is_one_line_naming_the_path(capsys):
    from flopplan.cli import FlopplanGroup

    @click.group(cls=FlopplanGroup)
    def group() -> None:
        pass

    @group.command()
    def probe() -> None:
        raise OSError(36, "File name too long", "a" * 300)

    with pytest.raises(SystemExit) as exit_:
        group.main(["probe"], prog_name="flopplan")
    assert exit_.value.code == 2
    assert capsys.readouterr().err == f"flopplan: cannot use {'a' * 300!r}: File name too long\n"


def test_the_experts_help_names_each_model_it_applies_to():
    """--experts said "MoE policies", but it also runs and counts a dense policy's mixture-of-experts reward model
    (plan and compare take it for one; train loads it so): each command with --experts and --reward says so."""
    from flopplan.cli import main

    def commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
        found = []
        for name, command in group.commands.items():
            found.append(((*path, name), command))
            if isinstance(command, click.Group):
                found += commands(command, (*path, name))
        return found

    checked = []
    for path, command in commands(main):
        options = {p.opts[0]: p for p in command.params if isinstance(p, click.Option)}
        if "--experts" in options and "--reward" in options:
            assert "the reward model" in (options["--experts"].help or ""), path
            checked.append(path[-1])
    assert {"plan", "compare", "train"} <= set(checked)


def test_train_help_states_one_default_per_option_and_lists_no_option_it_refuses():
    """train --help said "--micro-batch ... (default: G) (default: 64)" and listed --prompt-len, which it refuses."""
    text = " ".join(cli("train", "--help", check=True).stdout.split())
    assert "(default: G) (default:" not in text and "--micro-batch INTEGER" in text
    assert "--prompt-len" not in text and "--eval-prompt-len" not in text
    one_line_error(cli("train", "--prompt-len", "5", "--out", "unused"), "a run's prompts come from its task")
