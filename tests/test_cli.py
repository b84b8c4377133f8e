"""The command line: estimate --json equals FlopCounterMode; bad input is one line and exit code 2; no torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from configs import LLAMA_3_2_1B, MISTRAL_7B_V01, MISTRAL_7B_V03, QWEN3_0_6B
from helpers import cli, marked_slow_if_large, one_line_error, write_config

from flopplan.arch import REGISTRY
from flopplan.errors import UserError

run = cli  # every command below runs in this process; the no-torch checks need a fresh one


def estimate_json(*args: str) -> dict:
    out = run("estimate", *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


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


def test_estimate_json_has_exact_total_and_terms():
    data = estimate_json("--model", "qwen2.5-0.5b", "--phase", "forward", "--batch", "2", "--seq", "10")
    assert isinstance(data["flops"], int)
    assert data["flops"] == sum(data["terms"].values())
    assert data["request"]["logits"] == "all"


def test_lora_rank_without_targets_means_all_seven():
    data = estimate_json("--model", "qwen2.5-0.5b", "--phase", "train", "--seq", "10", "--lora-rank", "4")
    assert data["request"]["lora"]["targets"] == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                 "down_proj"]


def _counters():
    pytest.importorskip("torch")
    from flopplan.measure import counters
    from flopplan.measure.models import build_model

    return counters, build_model


CLI_CASES = [
    ("qwen2.5-3b", ["--phase", "forward", "--batch", "3", "--seq", "19", "--logits", "5"]),
    ("qwen2.5-14b", ["--phase", "decode", "--batch", "2", "--context", "300"]),
    ("qwen2.5-math-1.5b", ["--phase", "generate", "--batch", "2", "--prompt", "13", "--completion", "3"]),
    ("qwen2.5-32b", ["--phase", "train", "--batch", "1", "--seq", "17", "--logits", "last", "--lora-rank", "32",
                     "--lora-targets", "q_proj,k_proj,v_proj,o_proj", "--grad-ckpt"]),
    ("qwen2.5-math-prm-7b", ["--phase", "forward", "--batch", "2", "--seq", "21"]),
    ("qwen3", ["--phase", "train", "--batch", "2", "--seq", "15", "--logits", "6", "--lora-rank", "8"]),
    ("llama", ["--phase", "generate", "--batch", "1", "--prompt", "9", "--completion", "3"]),
    ("mistral", ["--phase", "train", "--batch", "1", "--seq", "12", "--grad-ckpt"]),
    ("mistral-v0.1", ["--phase", "decode", "--batch", "3", "--context", "40"]),
]
CONFIGS = {"qwen3": QWEN3_0_6B, "llama": LLAMA_3_2_1B, "mistral": MISTRAL_7B_V03, "mistral-v0.1": MISTRAL_7B_V01}


def _cli_case(model: str, args: list[str]) -> object:
    from flopplan.arch import resolve, spec_from_config

    spec = spec_from_config(CONFIGS[model], model) if model in CONFIGS else resolve(model)
    return marked_slow_if_large(spec.params, model, args)


@pytest.mark.parametrize(("model", "args"), [_cli_case(m, a) for m, a in CLI_CASES],
                         ids=[f"{m}-{a[1]}" for m, a in CLI_CASES])
def test_estimate_json_equals_flop_counter(tmp_path, model, args, record_exact):
    """The CLI's number, for registry names and for config.json files, equals FlopCounterMode's count."""
    counters, build_model = _counters()
    from flopplan.arch import resolve
    from flopplan.formulas import LoRA, Training

    name = str(write_config(tmp_path, model, CONFIGS[model])) if model in CONFIGS else model
    data = estimate_json("--model", name, *args)
    spec = resolve(name)
    opts = dict(zip(args[::2], args[1::2], strict=False))
    phase, batch = opts["--phase"], int(opts["--batch"])
    model_ = build_model(spec)
    if phase == "forward":
        logits = {"all": None, "last": 1}.get(opts.get("--logits", "all"))
        if opts.get("--logits", "all").isdigit():
            logits = int(opts["--logits"])
        measured = counters.forward(model_, batch, int(opts["--seq"]), logits)
    elif phase == "decode":
        measured = counters.decode(model_, batch, int(opts["--context"]))
    elif phase == "generate":
        measured = counters.generate(model_, batch, int(opts["--prompt"]), int(opts["--completion"]))
    else:
        lora = None
        if "--lora-rank" in opts:
            targets = opts.get("--lora-targets")
            lora = LoRA(int(opts["--lora-rank"]), tuple(targets.split(","))) if targets else LoRA(
                int(opts["--lora-rank"]))
        training = Training(lora, "non-reentrant" if "--grad-ckpt" in args else "none")
        logits = {"all": None, "last": 1}.get(opts.get("--logits", "all"))
        if opts.get("--logits", "").isdigit():
            logits = int(opts["--logits"])
        measured = counters.train_step(counters.prepare_training(model_, training), batch, int(opts["--seq"]),
                                       logits, training)
    record_exact(f"cli estimate {model} {' '.join(args)}", data["flops"], measured)


BAD = {
    "unknown model": ["estimate", "--model", "qwen9-1t", "--phase", "forward", "--seq", "8"],
    "missing config": ["estimate", "--model", "no/such/config.json", "--phase", "forward", "--seq", "8"],
    "zero seq": ["estimate", "--model", "qwen2.5-7b", "--phase", "forward", "--seq", "0"],
    "negative batch": ["estimate", "--model", "qwen2.5-7b", "--phase", "forward", "--seq", "8", "--batch", "-1"],
    "context with train": ["estimate", "--model", "qwen2.5-7b", "--phase", "train", "--seq", "8", "--context", "4"],
    "logits with decode": ["estimate", "--model", "qwen2.5-7b", "--phase", "decode", "--context", "4", "--logits",
                           "last"],
    "ckpt with forward": ["estimate", "--model", "qwen2.5-7b", "--phase", "forward", "--seq", "8", "--grad-ckpt"],
    "missing size": ["estimate", "--model", "qwen2.5-7b", "--phase", "generate", "--prompt", "8"],
    "logits too many": ["estimate", "--model", "qwen2.5-7b", "--phase", "forward", "--seq", "8", "--logits", "9"],
    "logits garbage": ["estimate", "--model", "qwen2.5-7b", "--phase", "forward", "--seq", "8", "--logits", "x"],
    "bad target": ["estimate", "--model", "qwen2.5-7b", "--phase", "train", "--seq", "8", "--lora-rank", "4",
                   "--lora-targets", "q_proj,lm_head"],
    "targets without rank": ["estimate", "--model", "qwen2.5-7b", "--phase", "train", "--seq", "8",
                             "--lora-targets", "q_proj"],
    "zero rank": ["estimate", "--model", "qwen2.5-7b", "--phase", "train", "--seq", "8", "--lora-rank", "0"],
    "prm generates": ["estimate", "--model", "qwen2.5-math-prm-7b", "--phase", "generate", "--prompt", "8",
                      "--completion", "4"],
    "bad phase": ["estimate", "--model", "qwen2.5-7b", "--phase", "sample", "--seq", "8"],
    "not an int": ["estimate", "--model", "qwen2.5-7b", "--phase", "forward", "--seq", "many"],
    "unknown option": ["estimate", "--model", "qwen2.5-7b", "--phase", "forward", "--seq", "8", "--fast"],
    "unknown command": ["frobnicate"],
    "window exceeded": ["estimate", "--model", "CONFIG_V01", "--phase", "decode", "--context", "5000"],
    "models bad context": ["models", "--context", "0"],
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_exit_2(tmp_path, case):
    args = [str(write_config(tmp_path, "v01", MISTRAL_7B_V01)) if a == "CONFIG_V01" else a for a in BAD[case]]
    one_line_error(run(*args))


def test_malformed_config_file(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "qwen2", "hidden_size": ')
    out = run("estimate", "--model", str(bad), "--phase", "forward", "--seq", "8")
    assert out.returncode == 2 and "not valid JSON" in out.stderr and len(out.stderr.strip().splitlines()) == 1


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
        if f.name in ("recipe", "plan"):  # the recipe's own options and --plan/--plan-model fill these
            continue
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
    from flopplan.cli.options import dataclass_values
    from flopplan.cli.train import train
    from flopplan.train.config import TrainConfig

    params = train.make_context("train", list(args)).params
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
        "eval_at_end": False, "charge_lost": True, "fixed_completion": False}
    assert values["loss"].upper_clip == 0.2  # --clip-eps-high defaults to --clip-eps
    given = _train_values("--out", "run", "--budget", "1e12", "--steps", "3", "--clip-eps", "0.1",
                          "--clip-eps-high", "0.28", "--loss-aggregation", "sequence", "--scale-rewards", "none",
                          "--lost-outside-budget", "--eval-targets", "heldout,long", "--eval-at-flops", "3e9,1e9",
                          "--fixed-completion-len", "--engine", "trl")
    assert given["loss"] == TrainLoss(0.1, 0.28, "none", "sequence")
    assert (given["budget_flops"], given["max_steps"], given["charge_lost"]) == (10**12, 3, False)
    assert given["eval_targets"] == ("heldout", "long") and given["eval_at_flops"] == (10**9, 3 * 10**9)
    assert given["fixed_completion"] is True and given["engine"] == "trl"
    assert _train_values("--out", "run", "--clip-eps", "0.3")["loss"].upper_clip == 0.3


FLAT_CONFIG = Path(__file__).parent / "fixtures" / "run-config-flat.json"
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
