"""RACE's axes: any recipe field (priced, as the classic shorthands price theirs) or FLOP-neutral training knob,
by flopplan's or GRPOConfig's name; what cannot be priced or run is refused in one line."""

from __future__ import annotations

import json
import re

import pytest
from helpers import cli, one_line_error

from flopplan.budget import Budget
from flopplan.errors import UserError
from flopplan.planfile import PlanEntry
from flopplan.planner import plan
from flopplan.race.axes import KNOB_OF_GRPO, NEUTRAL_KNOBS, RECIPE_OF_GRPO, knob_options, parse_axis, resolve
from flopplan.race.design import RaceDesign, training_only

RACE = ("--budget", "1.2e11", "--pilot-fraction", "0.5", "--models", "tiny-s", "--seeds", "2", "--rungs", "2",
        "--evals", "3", "--eval-prompts", "20", "--room", "1")


def test_a_grpo_config_axis_prices_each_arm_as_its_recipe_shorthand_does(tmp_path):
    cli("race", "design", *RACE, "--group-sizes", "4,8", "--out", str(tmp_path / "short"), check=True)
    cli("race", "design", *RACE, "--axis", "num_generations=4,8", "--axis", "learning_rate=1e-3,3e-3",
        "--out", str(tmp_path / "axes"), check=True)
    short, axes = RaceDesign.load(tmp_path / "short"), RaceDesign.load(tmp_path / "axes")
    assert [a.to_data() for a in axes.axes] == [{"name": "lr", "kind": "knob", "given": "learning_rate",
                                                 "values": [0.001, 0.003]}]
    assert [a.name for a in axes.arms] == ["tiny-s.G4.mu1.rule.lr0.001", "tiny-s.G4.mu1.rule.lr0.003",
                                           "tiny-s.G8.mu1.rule.lr0.001", "tiny-s.G8.mu1.rule.lr0.003"]
    by_g = {a.recipe.group_size: a for a in short.arms}
    for arm in axes.arms:  # the knob leaves the price alone: each arm's recipe is the shorthand's
        assert arm.axes == {"policy": "tiny-s", "group_size": arm.recipe.group_size, "iterations": 1,
                            "reward": "rule", "lr": arm.knobs["lr"]}
        twin = by_g[arm.recipe.group_size]
        assert arm.recipe == twin.recipe and arm.eval_flops == twin.eval_flops
        assert arm.rungs == tuple(PlanEntry.of(plan(training_only(arm.recipe), Budget(flops=float(b))))
                                  for b in axes.rung_flops)  # exactly the planner's steps at each rung
    data = json.loads((tmp_path / "axes" / "manifest.json").read_text())
    assert data["race_manifest_version"] == 5 and RaceDesign.from_data(data, "m").to_data() == data


def test_a_recipe_axis_changes_the_price_and_the_pilot_gets_its_knobs(tmp_path):
    from flopplan.race.runner import PilotTask, train_command

    cli("race", "design", *RACE, "--axis", "max_completion_length=2,4", "--axis", "temperature=0.7",
        "--axis", "loss_type=grpo", "--axis", "reward_funcs=exact,exact+math", "--out", str(tmp_path), check=True)
    design = RaceDesign.load(tmp_path)
    costs = {a.recipe.completion_len.max: a.rungs[0].step_flops for a in design.arms}
    assert costs[4] > costs[2]  # priced by its recipe: longer completions cost more per step
    arm = design.arm("tiny-s.G8.mu1.rule.completion_len4.temperature0.7.loss_aggregation-sequence."
                     "reward_funcs-exact+math")
    command = train_command(design, tmp_path, PilotTask(arm.name, 0, 0, 1, tmp_path / "p"))
    assert command[-8:] == ["--loss-aggregation", "sequence", "--reward-func", "exact", "--reward-func", "math",
                            "--temperature", "0.7"]


def test_a_length_axis_of_mean_max_and_file_values_reads_back_from_its_manifest(tmp_path):
    """A completion length given as MEAN:MAX or @FILE is recorded as written, so the manifest the design writes
    loads back with the same lengths (it was recorded as its description, which no loader could read)."""
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("3\n4\n4\n")
    cli("race", "design", *RACE, "--axis", f"completion_len=4,3:4,@{lengths}", "--out", str(tmp_path / "r"),
        check=True)
    design = RaceDesign.load(tmp_path / "r")
    assert sorted(a.recipe.completion_len.mean for a in design.arms) == pytest.approx([3.0, 11 / 3, 4.0])
    assert {a.recipe.completion_len.max for a in design.arms} == {4}
    assert RaceDesign.from_data(design.to_data(), "m").to_data() == design.to_data()


def test_the_grpo_config_names_map_to_the_fields_recipe_from_trl_reads():
    from flopplan.cli.race import race_base
    from flopplan.engines.trl import grpo_config_kwargs, recipe_from_trl

    base = race_base()
    config = grpo_config_kwargs(base)
    values = {"num_generations": 4, "num_iterations": 2, "beta": 0.04, "max_completion_length": 7,
              "gradient_checkpointing": True, "model_name_or_path": "tiny-l"}
    assert set(values) == set(RECIPE_OF_GRPO)
    for name, value in values.items():
        recipe, _, _ = recipe_from_trl({**config, name: value}, model=values["model_name_or_path"]
                                       if name == "model_name_or_path" else base.policy, prompt_len=base.prompt_len)
        got = getattr(recipe, RECIPE_OF_GRPO[name])
        assert (got.max if name == "max_completion_length" else got) == value
    assert set(KNOB_OF_GRPO.values()) <= set(NEUTRAL_KNOBS)


@pytest.mark.parametrize("axis, fragment", [
    ("task=digits:sum", "prompts"), ("seed=1,2", "the race sets it"), ("eval_prompts=10", "evaluation"),
    ("per_device_train_batch_size=4,8", "batch split"), ("use_liger_kernel=true", "cannot price"),
    ("use_vllm=true", "transformers"), ("fixed_completion=on", "completion_len"), ("colour=red", "not a recipe field"),
    ("group_size=four", "not a value"), ("learning_rate=-1", "lr"), ("beta=0.1,0.1", "twice"), ("lr", "NAME=V1"),
    ("loss_aggregation=mean", "one of"),
])
def test_an_axis_flopplan_cannot_price_or_run_is_one_line(tmp_path, axis, fragment):
    one_line_error(cli("race", "design", *RACE, "--axis", axis, "--out", str(tmp_path)), fragment)
    assert not (tmp_path / "manifest.json").exists()


def test_a_shorthand_and_its_axis_together_are_refused(tmp_path):
    one_line_error(cli("race", "design", *RACE, "--group-sizes", "4", "--axis", "num_generations=8", "--out",
                       str(tmp_path)), "given twice (--group-sizes and --axis num_generations)")


@pytest.mark.parametrize(("axes", "named"), [
    (("group_size=4,8", "num_generations=4"), "(--axis group_size and --axis num_generations)"),
    (("lr=1e-3,2e-3", "learning_rate=1e-3"), "(--axis lr and --axis learning_rate)"),
    (("beta=0,0.1", "beta=0.2"), "(--axis beta twice)"),
])
def test_two_axes_of_one_field_are_refused_naming_both(tmp_path, axes, named):
    """Both came from --axis: the refusal named "--axis num_generations and its shorthand option", which was not
    given."""
    argv = [x for axis in axes for x in ("--axis", axis)]
    one_line_error(cli("race", "design", *RACE, *argv, "--out", str(tmp_path)), f"is given twice {named}")
    assert not (tmp_path / "manifest.json").exists()


@pytest.mark.parametrize(("args", "fragment"), [
    (("--group-sizes", "4,4"), "--group-sizes names a value twice (4)"),
    (("--group-sizes", "4", "--group-sizes", "4,8"), "--group-sizes names a value twice (4)"),
    (("--models", "tiny-s,tiny-s", "--group-sizes", "4,8"), "--models names a value twice (tiny-s)"),
    (("--mus", "1,1", "--group-sizes", "4,8"), "--mus names a value twice (1)"),
    (("--rewards", "rule,rule", "--group-sizes", "4,8"), "--rewards names a value twice (rule)"),
])
def test_a_shorthand_option_naming_a_value_twice_is_refused_like_an_axis(tmp_path, args, fragment):
    """``--group-sizes 4,4`` became one arm ("1 arms x 1 seeds") while ``--axis group_size=4,4`` is refused."""
    one_line_error(cli("race", "design", *RACE, *args, "--out", str(tmp_path)), fragment)
    assert not (tmp_path / "manifest.json").exists()


@pytest.mark.parametrize("args", [
    ("--group-sizes", "4"),  # the shorthand options' values and the defaults give one arm
    ("--axis", "learning_rate=1e-3"),  # with an axis, what no axis varies is the base recipe's
])
def test_a_grid_of_one_arm_is_refused(tmp_path, args):
    """One arm has nothing to compare: it was designed, run and recommended with P(best) 1.000."""
    one_line_error(cli("race", "design", *RACE, *args, "--out", str(tmp_path)),
                   "a race compares arms: the grid has one (tiny-s.G")
    assert not (tmp_path / "manifest.json").exists()


def test_a_grpo_only_knob_is_designed_but_the_builtin_trainer_refuses_to_run_it(tmp_path):
    assert parse_axis("loss_type=bnpo,dapo").kind == "grpo" and resolve("top_p") == ("grpo", "top_p")
    cli("race", "design", *RACE, "--axis", "loss_type=bnpo,dapo", "--out", str(tmp_path), check=True)
    assert {a.name: a.grpo for a in RaceDesign.load(tmp_path).arms}["tiny-s.G8.mu1.rule.loss_type-bnpo"] == {
        "loss_type": "bnpo"}
    one_line_error(cli("race", "run", str(tmp_path)), "needs pilots that run TRL")
    assert not (tmp_path / "pilots").exists()


NEUTRAL_SAMPLES = {"lr": 0.01, "lora_alpha": 16, "temperature": 0.5, "loss_clip_low": 0.1, "loss_clip_high": 0.3,
                   "loss_scale_rewards": "none", "loss_aggregation": "sequence", "max_grad_norm": 0.5,
                   "weight_decay": 0.1, "format_reward": 0.5, "reward_funcs": "exact+math",
                   "reward_weights": "1", "train_size": 500}
"""A changed value of every FLOP-neutral knob a rule-reward run takes (prm_aggregate and reward_output turn a
reward model's scores into a reward after its forward: they need a model to apply to)."""


@pytest.mark.slow
def test_every_flop_neutral_knob_leaves_a_runs_ledger_flop_for_flop(tmp_path):
    pytest.importorskip("torch")
    assert set(NEUTRAL_SAMPLES) | {"prm_aggregate", "reward_output"} == set(NEUTRAL_KNOBS)
    base = ["train", "--model", "tiny-s", "--lora-rank", "4", "--prompts-per-step", "8", "-G", "4",
            "--completion-len", "3", "--steps", "2", "--fixed-completion-len", "--no-progress"]

    def flops(name: str, *options: str) -> dict[str, int]:
        cli(*base, "--out", str(tmp_path / name), *options, check=True)
        return json.loads((tmp_path / name / "summary.json").read_text())["flops"]

    reference = flops("default")
    for knob, value in NEUTRAL_SAMPLES.items():
        options = knob_options({knob: value})
        if knob == "reward_weights":
            options = [*knob_options({"reward_funcs": "exact+math"}), "--reward-weights", "1,0.5"]
        assert flops(knob, *options) == reference, knob


def test_a_grpo_only_value_trl_cannot_take_is_refused_when_the_race_is_designed(tmp_path):
    """The installed TRL's GRPOConfig checks each GRPOConfig-only value at design time, by its field's type and by
    GRPOConfig's own checks, so a pilot does not fail on it after the other arms have spent their budget."""
    from enum import Enum

    from flopplan.race.grpo_check import _fits

    assert parse_axis("top_p=0.9,1.0").values == (0.9, 1.0)
    assert parse_axis("lr_scheduler_type=cosine,constant").kind == "grpo"
    for text, says in [("top_p=0.9,fast", "top_p is float, not str"), ("top_k=0.5", "top_k is int, not float"),
                       ("model_init_kwargs=3", "dict[str, Any] | str | None, not int"), ("delta=null", "null is none"),
                       ("optim=adamw_torch,bogus", "GRPOConfig refuses it: bogus is not a valid OptimizerNames")]:
        with pytest.raises(UserError, match=re.escape(says)) as info:
            parse_axis(text)
        assert "\n" not in str(info.value)
    one_line_error(cli("race", "design", *RACE, "--axis", "top_p=0.9,fast", "--out", str(tmp_path)), "float")
    assert not (tmp_path / "manifest.json").exists()
    colour = Enum("colour", {"RED": "red"})
    assert _fits(1, float) and not _fits(True, float) and _fits(None, float | None) and _fits("red", colour)
    assert not _fits("blue", colour) and not _fits(0.5, list[float] | None) and _fits(3, object)


def test_the_base_recipe_is_checked_as_the_grids_arms_not_as_a_group_size_no_arm_has(tmp_path):
    """The base recipe's default group size (8) is no arm's here: a generation batch that divides every arm's
    rollouts (16 x 3, 16 x 6) is taken, and the arms can train (the micro-batch divides the generation batch); one
    that does not divide an arm's rollouts is refused naming that arm, first in the grid or not."""
    from flopplan.train.config import TrainConfig

    cli("race", "design", *RACE, "--group-sizes", "3,6", "--generation-batch", "6", "--out", str(tmp_path / "a"),
        check=True)
    arms = RaceDesign.load(tmp_path / "a").arms
    assert sorted(a.recipe.group_size for a in arms) == [3, 6]
    assert {a.recipe.generation_batch_size for a in arms} == {6}
    for arm in arms:  # what `race run` builds for each pilot (it refused every arm: micro_batch 48 > 6)
        TrainConfig(recipe=arm.recipe, out_dir=str(tmp_path / "run"), max_steps=1, random_init=True)
    for order in ("3,5", "5,3"):
        line = one_line_error(cli("race", "design", *RACE, "--axis", f"num_generations={order}", "--generation-batch",
                                  "6", "--out", str(tmp_path / order)), "16 prompts x 5 = 80")
        assert "arm tiny-s.G5" in line and not (tmp_path / order / "manifest.json").exists()


def test_an_option_is_read_with_each_arm_and_refused_where_an_axis_varies_its_field(tmp_path):
    """A recipe file's generation batch replaced by the option is not what the arms are checked with; an option for
    a field an axis varies would be replaced by the axis's values in every arm: refused, not dropped."""
    saved = tmp_path / "r.toml"
    cli("plan", "--model", "qwen2.5-0.5b", "--generation-batch", "32", "--save-recipe", str(saved), check=True)
    cli("race", "design", *RACE, "--budget", "1e17", "--recipe", str(saved), "--group-sizes",
        "3,9", "--generation-batch", "3", "--out", str(tmp_path / "a"), check=True)  # the file's lengths cost more
    assert {a.recipe.generation_batch_size for a in RaceDesign.load(tmp_path / "a").arms} == {3}
    one_line_error(cli("race", "design", *RACE, "--axis", "beta=0,0.1", "--beta", "0.5", "--out",
                       str(tmp_path / "b")), "--beta sets beta, which an axis of the grid varies")
    one_line_error(cli("race", "design", *RACE, "--axis", "lora_rank=8,16", "--full", "--out", str(tmp_path / "c")),
                   "--full sets lora_rank")
    one_line_error(cli("race", "design", *RACE, "--axis", "grad_ckpt=on,off", "--no-grad-ckpt", "--out",
                       str(tmp_path / "d")), "--no-grad-ckpt sets grad_ckpt")


def test_a_reward_model_option_is_taken_when_some_arm_has_a_reward_model(tmp_path):
    cli("race", "design", *RACE, "--budget", "1e14", "--rewards", "rule,prm:tiny", "--prm-steps", "3", "--out",
        str(tmp_path / "a"), check=True)  # the last --budget counts: a process reward model's arm costs more
    prm = [a for a in RaceDesign.load(tmp_path / "a").arms if a.recipe.reward.kind == "prm"]
    assert prm and all(a.recipe.prm_steps == 3 for a in prm)
    one_line_error(cli("race", "design", *RACE, "--rewards", "rule", "--prm-steps", "3", "--out",
                       str(tmp_path / "b")), "--prm-steps applies to a process reward model (--rewards prm:MODEL)")
    one_line_error(cli("race", "design", *RACE, "--rewards", "rule,orm:tiny-rm", "--reward-model-path", "rm",
                       "--prm-steps", "3", "--out", str(tmp_path / "c")), "(the grid's rewards: orm:tiny-rm, rule)")
    one_line_error(cli("race", "design", *RACE, "--rewards", "rule", "--reward-overhead", "4", "--out",
                       str(tmp_path / "d")), "--reward-overhead applies to a reward model (--rewards orm:MODEL")


def test_plan_names_its_own_reward_option_when_a_reward_model_option_does_not_apply():
    """plan's option is --reward (one system), race design's --rewards (the grid's): each refusal names its own."""
    one_line_error(cli("plan", "--reward", "rule", "--prm-steps", "3"),
                   "--prm-steps applies to a process reward model (--reward prm:MODEL), not rule")


def test_the_default_grid_does_not_silently_replace_a_recipe_files_policy(tmp_path):
    """Without an axis the default grid races tiny-s, tiny and tiny-l: a recipe file of qwen2.5-0.5b is refused
    with the option that races it, and taken once its policy is named."""
    saved = tmp_path / "q.toml"
    cli("plan", "--model", "qwen2.5-0.5b", "--save-recipe", str(saved), check=True)
    one_line_error(cli("race", "design", "--budget", "1e19", "--recipe", str(saved), "--out", str(tmp_path / "a")),
                   "sets policy qwen2.5-0.5b, which the default grid would replace")
    cli("race", "design", "--budget", "1e19", "--recipe", str(saved), "--models", "qwen2.5-0.5b", "--out",
        str(tmp_path / "b"), check=True)
    assert {a.recipe.policy for a in RaceDesign.load(tmp_path / "b").arms} == {"qwen2.5-0.5b"}


def test_an_arm_named_by_an_absolute_path_does_not_start_like_a_flag():
    """An arm whose policy is an absolute folder was named ``-tmp-...``: `--plan-model -tmp-...` reads as a flag."""
    from flopplan.race.axes import arm_name

    name = arm_name({"policy": "/tmp/team/models/llama-a", "group_size": 4, "iterations": 1, "reward": "rule"}, ())
    assert name == "tmp-team-models-llama-a.G4.mu1.rule"
    plain = arm_name({"policy": "tiny-s", "group_size": 8, "iterations": 2, "reward": "rule"}, ())
    assert plain == "tiny-s.G8.mu2.rule"


def test_an_arm_whose_policy_is_a_relative_config_reads_it_from_any_folder(tmp_path, monkeypatch):
    """A policy given by a relative path was kept as given: `race run` (and a Ray worker) elsewhere could not read
    it ("cannot read config 'pol/config.json'"). The arms' recipes name it by its absolute path, their names by the
    spelling given; a registry name stays a registry name, whatever folder of that name is here."""
    (tmp_path / "pol").mkdir()
    config = {"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300, "max_position_embeddings": 512}
    (tmp_path / "pol" / "config.json").write_text(json.dumps(config))
    (tmp_path / "tiny-s").mkdir()  # a folder of a registry name: not what `tiny-s` names
    monkeypatch.chdir(tmp_path)
    cli("race", "design", "--budget", "1.2e12", "--pilot-fraction", "0.5", "--models", "pol/config.json,tiny-s",
        "--seeds", "2", "--rungs", "2", "--evals", "3", "--eval-prompts", "20", "--out", "r", check=True)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    design = RaceDesign.load("../r")
    policies = {a.name.split(".G")[0]: a.recipe.policy for a in design.arms}
    assert policies == {"pol-config.json": str(tmp_path / "pol" / "config.json"), "tiny-s": "tiny-s"}
    for arm in design.arms:  # what the runner plans each pilot with, read from here
        assert plan(arm.recipe, Budget(flops=float(design.rung_flops[-1]))).steps >= 1
    # what a script pilot loads (spec.model): the path, not the arm's relative spelling (a held-out team's pilots
    # ran where it did not exist, and transformers looked for a Hub model of that name)
    from flopplan.race.user_pilot import write_spec

    arm = next(a for a in design.arms if a.name.startswith("pol-config.json"))
    spec = write_spec(design, tmp_path / "r", arm.name, 0, 0, arm.pilot_budget(design, 0), tmp_path / "pilot")
    assert spec.model == str(tmp_path / "pol" / "config.json")
