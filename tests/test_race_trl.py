"""RACE whose pilots are the user's own TRL script (``race run DIR --pilot CMD``; examples/race_trl/train_grpo.py):
the spec a pilot reads, bad pilot commands (one line, exit 2, the folders kept), and the helpers of the example's
quick race (2 arms x 1 seed x 2 rungs), which :mod:`test_race_ray` runs on Ray with its driver and a Ray
worker killed mid-rung (it shares that module's Ray cluster)."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, cli, one_line_error

from flopplan.errors import UserError
from flopplan.race.design import RaceDesign

EXAMPLE = ROOT / "examples" / "race_trl" / "train_grpo.py"
DESIGN = ("--budget", "1.2e10", "--pilot-fraction", "0.5", "--models", "tiny-s,tiny", "--group-sizes", "4",
          "--prompts-per-step", "4", "--prompt-len", "9", "--completion-len", "2", "--full", "--logprob-head", "fused",
          "--attention-kernel", "sdpa",
          "--seeds", "1", "--rungs", "2", "--room", "1", "--evals", "2", "--eval-prompts", "16", "--eval-loop", "trl",
          "--eval-targets", "heldout", "--fit-targets", "heldout")
"""The example's race: tiny-s and tiny (G 4, 4 prompts a round), one seed, two rungs, evaluations priced as TRL's
evaluation loop (one completion per prompt), attention as the script's policy runs it (transformers' SDPA)."""


def _design(folder: Path) -> RaceDesign:
    cli("race", "design", *DESIGN, "--out", str(folder), check=True)
    return RaceDesign.load(folder)


def _script(tmp: Path, body: str) -> str:
    path = tmp / "pilot_script.py"
    path.write_text(body)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"


def test_a_pilot_spec_round_trips_and_a_standalone_script_gets_none(tmp_path, monkeypatch):
    import flopplan.race
    from flopplan.race.user_pilot import write_spec

    monkeypatch.delenv("FLOPPLAN_PILOT", raising=False)
    assert flopplan.race.pilot() is None
    design = _design(tmp_path / "race")
    arm = design.arms[0]
    spec = write_spec(design, tmp_path / "race", arm.name, 0, 1, arm.pilot_budget(design, 1), tmp_path / "run")
    monkeypatch.setenv("FLOPPLAN_PILOT", str(tmp_path / "run" / "pilot.json"))
    assert flopplan.race.pilot() == spec
    assert spec.budget == arm.pilot_budget(design, 1) and spec.eval_points == design.eval_points
    assert spec.model == "tiny-s" and spec.peft is None and not spec.resume
    fields = spec.overrides()
    assert fields["num_generations"] == 4 and fields["per_device_train_batch_size"] == 16
    assert fields["output_dir"] == str((tmp_path / "run" / "checkpoints").resolve()) and fields["eval_on_start"]
    assert spec.apply({"learning_rate": 1e-5})["learning_rate"] == 1e-5


@pytest.mark.slow  # imports TRL (about 13 s)
def test_a_warmup_given_as_a_share_of_max_steps_is_refused_and_one_in_steps_is_kept(tmp_path):
    """A pilot runs with max_steps 10^7 (the budget ends each rung): warmup_steps=0.1, transformers' ratio form,
    would hold the learning rate near 0 for a million steps, so the pilots would learn nothing. Refused in one line,
    for a GRPOConfig and for a dict (and warmup_ratio, an older release's field); a warmup in steps is kept."""
    from trl import GRPOConfig

    from flopplan.race.user_pilot import write_spec

    design = _design(tmp_path / "race")
    arm = design.arms[0]
    spec = write_spec(design, tmp_path / "race", arm.name, 0, 0, arm.pilot_budget(design, 0), tmp_path / "run")
    config = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, report_to="none",
                        warmup_steps=0.1, lr_scheduler_type="cosine")
    assert config.get_warmup_steps(10**7) == 10**6  # what the pilot would have run
    with pytest.raises(UserError, match=r"warmup_steps=0\.1 is a share of max_steps.*1,000,000 steps"):
        spec.apply(config)
    with pytest.raises(UserError, match=r"warmup_ratio=0\.05 is a share"):
        spec.apply({"warmup_ratio": 0.05})
    with pytest.raises(UserError, match=r"warmup_steps=0\.1 is a share"):  # an arm's setting (a hand-made manifest)
        dataclasses.replace(spec, settings={"warmup_steps": 0.1}).apply({})
    one_line_error(cli("race", "design", *DESIGN, "--axis", "warmup_steps=0,0.1", "--out", str(tmp_path / "axis")),
                   "--axis warmup_steps=0.1: warmup_steps=0.1 is a share of max_steps")
    kept = spec.apply(GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, report_to="none",
                                 warmup_steps=20))
    assert kept.warmup_steps == 20 and kept.get_warmup_steps(kept.max_steps) == 20


@pytest.mark.slow  # imports TRL (about 13 s)
def test_spec_apply_gives_the_same_config_from_a_dict_as_from_a_grpoconfig(tmp_path):
    """The guide offers both forms: a script's dict of GRPOConfig fields with its own generation batch was turned into
    a dict TRL refuses ("'generation_batch_size' and 'steps_per_generation' can not be both configured"), while the
    same fields as a GRPOConfig were taken."""
    from trl import GRPOConfig

    from flopplan.race.user_pilot import write_spec

    design = _design(tmp_path / "race")
    arm = design.arms[0]
    spec = write_spec(design, tmp_path / "race", arm.name, 0, 0, arm.pilot_budget(design, 0), tmp_path / "run")
    own = {"output_dir": str(tmp_path / "out"), "use_cpu": True, "bf16": False, "report_to": "none",
           "generation_batch_size": 16, "learning_rate": 3e-4}
    from_dict, from_config = GRPOConfig(**spec.apply(dict(own))), spec.apply(GRPOConfig(**own))
    for name in ("steps_per_generation", "generation_batch_size", "per_device_train_batch_size", "num_generations",
                 "max_steps", "save_steps", "eval_steps", "learning_rate", "output_dir"):
        assert getattr(from_dict, name) == getattr(from_config, name), name


@pytest.mark.slow  # imports TRL (about 13 s)
def test_a_pilot_whose_eval_dataset_is_not_the_designs_is_refused_before_it_trains(tmp_path):
    """The analysis resamples the evaluation prompts and refuses one; an evaluation set of another size than the
    design's was priced wrong (64 prompts where 16 were designed ate a pilot's training FLOPs, or left none for a
    round) and a dict of sets is not one target's. The pilot refuses each when it is metered, not after every pilot
    of the race has run. (A stand-in trainer: only the fields ``meter`` reads before training.)"""
    from types import SimpleNamespace

    from flopplan.race.user_pilot import write_spec

    design = _design(tmp_path / "race")
    arm = design.arms[0]
    spec = write_spec(design, tmp_path / "race", arm.name, 0, 0, arm.pilot_budget(design, 0), tmp_path / "run")
    trainer = SimpleNamespace(accelerator=SimpleNamespace(num_processes=1), args=SimpleNamespace(**spec.overrides()),
                              eval_dataset=[{"prompt": "1+1="}])
    with pytest.raises(UserError, match="eval_dataset has 1 prompt"):
        spec.meter(trainer)
    trainer.eval_dataset = [{"prompt": f"{i}+1="} for i in range(64)]
    with pytest.raises(UserError, match=r"eval_dataset has 64 prompts, the race's evaluations 16 .*--eval-prompts 64"):
        spec.meter(trainer)
    trainer.eval_dataset = {"arith": [{"prompt": f"{i}+1="} for i in range(16)]}
    with pytest.raises(UserError, match="one eval_dataset"):
        spec.meter(trainer)


@pytest.mark.slow  # imports TRL (about 13 s)
def test_a_script_race_prices_trls_evaluation_loop_and_its_pilots_sample_what_was_priced(tmp_path):
    """--eval-loop trl prices each evaluation as TRL's loop runs it (G_eval sampled completions per prompt, the
    scoring passes, the loss forward): more than flopplan's greedy pass, by the design's own pricing of both; the
    manifest records it (an older manifest reads as flopplan's); a pilot's spec sets num_generations_eval, and a
    trainer that samples another count is refused. The example race trains the steps its rungs were planned for
    (test_a_script_race_stopped_by_ctrl_c_mid_round_resumes_its_pilot_with_nothing_lost)."""
    from types import SimpleNamespace

    from flopplan.race.design import MANIFEST
    from flopplan.race.user_pilot import write_spec

    trl = _design(tmp_path / "trl")
    greedy = cli("race", "design", *DESIGN, "--eval-loop", "flopplan", "--out", str(tmp_path / "greedy"), check=True)
    assert greedy.returncode == 0
    flopplan = RaceDesign.load(tmp_path / "greedy")
    assert (trl.eval_loop, trl.eval_generations, flopplan.eval_loop, flopplan.eval_generations) == ("trl", 1,
                                                                                                   "flopplan", 0)
    for a, b in zip(trl.arms, flopplan.arms, strict=True):  # the same prompts: sampling + scoring + loss > greedy
        assert a.eval_flops > b.eval_flops > 0, a.name
    four = cli("race", "design", *DESIGN, "--eval-generations", "4", "--budget", "4e10",  # (they cost more)
               "--out", str(tmp_path / "four"), check=True)
    assert four.returncode == 0
    assert all(f.eval_flops > a.eval_flops for f, a in zip(RaceDesign.load(tmp_path / "four").arms, trl.arms,
                                                             strict=True))
    old = json.loads((tmp_path / "greedy" / MANIFEST).read_text())
    for key in ("eval_loop", "eval_generations"):
        del old[key]
    old["race_manifest_version"] = 3
    assert RaceDesign.from_data(old, "m").eval_loop == "flopplan"

    arm = trl.arms[0]
    spec = write_spec(trl, tmp_path / "trl", arm.name, 0, 0, arm.pilot_budget(trl, 0), tmp_path / "run")
    assert spec.eval_generations == 1 and spec.apply({})["num_generations_eval"] == 1
    trainer = SimpleNamespace(accelerator=SimpleNamespace(num_processes=1),
                              args=SimpleNamespace(**{**spec.overrides(), "num_generations_eval": 4}),
                              eval_dataset=[{"prompt": f"{i}+1="} for i in range(16)])
    with pytest.raises(UserError, match="num_generations_eval is 4, the pilot's 1"):
        spec.meter(trainer)


@pytest.mark.parametrize(("args", "fragment"), [
    (("--eval-loop", "flopplan", "--eval-generations", "2"), "--eval-generations is for TRL's evaluation loop"),
    (("--eval-targets", "heldout,long"), "one --eval-targets, not heldout,long"),
    (("--eval-generations", "0"), "--eval-generations"),
])
def test_a_script_races_evaluation_is_refused_where_it_cannot_be_priced(tmp_path, args, fragment):
    one_line_error(cli("race", "design", *DESIGN, *args, "--out", str(tmp_path / "race")), fragment)
    assert not (tmp_path / "race").exists()


def test_a_race_priced_for_trls_evaluation_loop_runs_only_as_a_script(tmp_path):
    _design(tmp_path / "race")
    one_line_error(cli("race", "run", str(tmp_path / "race")), "--eval-loop trl")
    assert not (tmp_path / "race" / "pilots").exists()


@pytest.mark.slow  # imports TRL (about 13 s)
def test_a_script_that_ignores_the_arms_lora_is_refused_before_it_trains_another_arm(tmp_path):
    """The example script built GRPOTrainer without spec.peft: the LoRA arm's pilot trained full fine-tuning, its
    ledger that arm's, 22 of the 27 steps the design planned for LoRA (a review of held-out axes). A trainer whose
    model carries another LoRA rank than the arm's, or none where the arm has one, or one where the arm is full
    fine-tuning, is refused when metered. (A stand-in trainer: only the fields ``meter`` reads before training.)"""
    from types import SimpleNamespace

    from peft import LoraConfig

    from flopplan.race.user_pilot import write_spec

    one_model = [a if a != "tiny-s,tiny" else "tiny-s" for a in DESIGN if a != "--full"]
    cli("race", "design", *one_model, "--axis", "lora_rank=4,full", "--out", str(tmp_path / "race"), check=True)
    design = RaceDesign.load(tmp_path / "race")
    lora, full = (next(a for a in design.arms if a.name.endswith(end)) for end in ("rank4", "rank-full"))
    evals = [{"prompt": f"{i}+1="} for i in range(16)]

    def trainer_for(arm: object, model: object) -> tuple[object, object]:
        spec = write_spec(design, tmp_path / "race", arm.name, 0, 0, arm.pilot_budget(design, 0),  # type: ignore
                          tmp_path / arm.name)  # type: ignore[attr-defined]
        return spec, SimpleNamespace(accelerator=SimpleNamespace(num_processes=1), model=model,
                                     args=SimpleNamespace(**spec.overrides()), eval_dataset=evals)

    spec, trainer = trainer_for(lora, SimpleNamespace())
    assert spec.peft is not None and spec.peft["r"] == 4
    with pytest.raises(UserError, match=r"no adapters \(full fine-tuning\); the arm trains LoRA rank 4 .*peft_config"):
        spec.meter(trainer)
    spec, trainer = trainer_for(lora, SimpleNamespace(peft_config={"default": LoraConfig(r=8)}))
    with pytest.raises(UserError, match="has LoRA rank 8; the arm trains LoRA rank 4"):
        spec.meter(trainer)
    spec, trainer = trainer_for(full, SimpleNamespace(peft_config={"default": LoraConfig(r=4)}))
    with pytest.raises(UserError, match=r"has LoRA rank 4; the arm trains full fine-tuning"):
        spec.meter(trainer)


@pytest.mark.slow  # imports TRL (about 13 s)
def test_a_race_designed_for_two_processes_writes_its_specs_and_evaluates_the_rows_it_priced(tmp_path, monkeypatch):
    """A design whose generation batch is half the round's rollouts (--generation-batch 8 of 16) is a race for 2
    processes: its pilots' specs are written (race run refused them, computing the arm's GRPOConfig on one process).
    On 2 processes the example's evaluation batch (16 a process) made accelerate repeat the 16 designed rows to 32,
    charged twice the price, and its pilots stopped short: spec.apply sets the largest batch that repeats none, and
    a trainer that still would is refused."""
    from types import SimpleNamespace

    from flopplan.engines.trl import implied_world_size
    from flopplan.race.user_pilot import write_spec

    two = [*DESIGN, "--generation-batch", "8", "--micro-batch", "8"]
    cli("race", "design", *two, "--out", str(tmp_path / "race"), check=True)
    design = RaceDesign.load(tmp_path / "race")
    arm = design.arms[0]
    assert implied_world_size(arm.recipe) == 2 and implied_world_size(_design(tmp_path / "one").arms[0].recipe) == 1
    spec = write_spec(design, tmp_path / "race", arm.name, 0, 0, arm.pilot_budget(design, 0), tmp_path / "run")
    assert spec.grpo["per_device_train_batch_size"] == 8 and spec.evaluation_rows() == 16
    assert [spec.evaluation_batch(b, w) for b, w in ((16, 2), (8, 2), (5, 2), (16, 1), (3, 1))] == [8, None, 4, None, 2]
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert spec.apply({"per_device_eval_batch_size": 16})["per_device_eval_batch_size"] == 8
    assert spec.apply({"per_device_eval_batch_size": 4})["per_device_eval_batch_size"] == 4  # repeats none: kept
    trainer = SimpleNamespace(accelerator=SimpleNamespace(num_processes=2), eval_dataset=[{"prompt": "1+1="}] * 16,
                              args=SimpleNamespace(**{**spec.overrides(2), "per_device_eval_batch_size": 16}))
    with pytest.raises(UserError, match=r"evaluation of 16 rows in batches of 16 on 2 processes repeats rows .* "
                                        r"set per_device_eval_batch_size to 8"):
        spec.meter(trainer)
    cli("race", "design", *two, "--eval-prompts", "15", "--out", str(tmp_path / "odd"), check=True)
    odd = RaceDesign.load(tmp_path / "odd")
    spec = write_spec(odd, tmp_path / "odd", odd.arms[0].name, 0, 0, odd.arms[0].pilot_budget(odd, 0), tmp_path / "o")
    trainer.eval_dataset = trainer.eval_dataset[:15]
    trainer.args = SimpleNamespace(**{**spec.overrides(2), "per_device_eval_batch_size": 16})
    with pytest.raises(UserError, match="design the race with --eval-prompts a multiple of 2"):
        spec.meter(trainer)


@pytest.mark.slow  # trains a reward model (about 10 s)
def test_an_orm_arms_pilot_spec_names_the_reward_model_the_design_trained(tmp_path):
    """An ``orm:`` arm of a script race scores with the reward model given at design (``--reward-model-path``): its
    pilot's spec carries the folder (absolute, so the script may run anywhere) for the script to load; a ``rule``
    arm's carries none (its rewards are the script's own)."""
    from flopplan.race.script import load_spec
    from flopplan.race.user_pilot import write_spec

    one_model = [a if a != "tiny-s,tiny" else "tiny-s" for a in DESIGN]
    cli("reward-model", "train", "--out", str(tmp_path / "rm"), "--samples", "64", "--held-out", "32", "--validation",
        "32", "--steps", "2", "--batch", "8", "--target-agreement", "none", check=True)
    cli("race", "design", *one_model, "--budget", "2e10", "--rewards", "rule,orm:tiny-rm", "--reward-model-path",
        str(tmp_path / "rm"), "--out", str(tmp_path / "race"), check=True)
    design = RaceDesign.load(tmp_path / "race")
    specs = {arm.axes["reward"]: write_spec(design, tmp_path / "race", arm.name, 0, 0, arm.pilot_budget(design, 0),
                                            tmp_path / arm.name) for arm in design.arms}
    assert set(specs) == {"rule", "orm:tiny-rm"}
    assert specs["orm:tiny-rm"].reward_model == str((tmp_path / "rm").resolve()) and specs["rule"].reward_model is None
    assert load_spec(tmp_path / design.arms[1].name / "pilot.json") == specs[design.arms[1].axes["reward"]]
    orm, rule = specs["orm:tiny-rm"], specs["rule"]  # a reward model's own tokenizer may read the prompts longer
    priced = orm.recipe.prompt_len.max + orm.recipe.reward_overhead_tokens
    assert orm.recipe.evaluation_prompt_len.max == orm.recipe.prompt_len.max == 9
    orm.check_lengths(9, 9, priced, priced)
    rule.check_lengths(9, 9, priced + 1, priced + 1)  # no reward model: nothing reads them so
    over, allowance = priced + 1 - 9, orm.recipe.reward_overhead_tokens
    for data, flag, lengths in (("train_dataset", "--prompt-len", (priced + 1, 0)),
                                ("eval_dataset", "--eval-prompt-len", (0, priced + 1))):
        with pytest.raises(UserError, match=rf"the reward model's tokenizer reads the trainer's {data} prompts as up "
                                            rf"to {priced + 1} tokens, the race priced its reads at most 9 "
                                            rf"\({flag}\) \+ {allowance} \(--reward-overhead\): design the race "
                                            rf"with --reward-overhead {over} \(what it reads beyond {flag}: its "
                                            rf"template or its own split of the prompts\), or shorten the "
                                            rf"prompts$"):
            orm.check_lengths(9, 9, *lengths)
    orm.check_lengths(9, 9, 9, 9, priced - 9)  # a reward tokenizer that reads a completion in more tokens than the
    with pytest.raises(UserError, match=rf"reads the trainer's train_dataset prompts as up to 9 tokens and a "  # policy
                                        rf"completion at its longest in about {priced - 8} tokens more than the "
                                        rf"policy's, .* design the race with --reward-overhead {allowance + 1} "
                                        rf"\(what it reads beyond --prompt-len: its template or its own split of "
                                        rf"the prompts, and the completion read again\)"):
        orm.check_lengths(9, 9, 9, 9, priced - 8)
    with pytest.raises(UserError, match=rf"eval_dataset prompts as up to {priced + 3} tokens.* --reward-overhead "
                                        rf"{allowance + 3} "):  # one redesign: the larger of the two named
        orm.check_lengths(9, 9, priced + 1, priced + 3)


def _eager_pilot(tmp_path: Path) -> tuple:
    """A rung-0 spec of the tiny-s arm of :data:`DESIGN` priced with eager attention, and a maker of the example's
    real GRPOTrainers built from it (of a model and an attention implementation)."""
    import importlib.util

    from datasets import load_dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from flopplan.race.user_pilot import write_spec

    loaded = importlib.util.spec_from_file_location("race_trl_example", EXAMPLE)
    example = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(example)  # type: ignore[union-attr]
    eager = [a if a != "sdpa" else "eager" for a in DESIGN]
    cli("race", "design", *eager, "--out", str(tmp_path / "race"), check=True)
    design = RaceDesign.load(tmp_path / "race")
    arm = next(a for a in design.arms if a.axes["policy"] == "tiny-s")
    spec = write_spec(design, tmp_path / "race", arm.name, 0, 0, arm.pilot_budget(design, 0), tmp_path / "run")
    example.write_task(tmp_path / "data", 32, 16)
    data = {name: load_dataset("parquet", data_files=str(tmp_path / "data" / f"{name}.parquet"), split="train")
            for name in ("train", "test")}

    def trainer(model: str, attention: str) -> object:
        folder = example.local_model(model, tmp_path / "models")
        config = spec.apply(GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=16,
                                       num_generations=4, max_completion_length=2, report_to="none", use_cpu=True,
                                       bf16=False))
        return GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(folder, attn_implementation=attention),
                           reward_funcs=[example.accuracy_reward], args=config, train_dataset=data["train"],
                           eval_dataset=data["test"])

    return spec, trainer


@pytest.mark.slow  # imports TRL (about 13 s)
def test_a_trainer_that_runs_another_round_than_the_arm_was_priced_for_is_refused(tmp_path):
    """The example script loads its policy with transformers' default attention (SDPA), whose backward recomputes
    the scores (2.5x the forward, not eager's 2x): a race priced with eager attention charged every update 495,616
    FLOPs more than planned and its LoRA pilot stopped a step short of its rung (a held-out axis). A real
    GRPOTrainer that runs another attention kernel, or another model, than its arm was priced with is refused
    before it trains, naming what to change; the one that runs the priced round passes."""
    spec, trainer = _eager_pilot(tmp_path)
    with pytest.raises(UserError, match=r"attention_kernel 'sdpa' \(attn_implementation 'sdpa'\), the arm's "
                                        r"'eager'; design the race with --attention-kernel sdpa, or load the policy "
                                        r"with attn_implementation='eager'"):
        spec.check_round(trainer("tiny-s", "sdpa"))
    with pytest.raises(UserError, match=r"its policy_spec is another model than the arm's: hidden_size \d+ \(the "
                                        r"arm's \d+\).*; load the arm's model"):
        spec.check_round(trainer("tiny", "eager"))
    spec.check_round(trainer("tiny-s", "eager"))  # the round the arm was priced for


@pytest.mark.slow  # imports TRL (about 13 s)
def test_a_pilot_whose_rung_cap_buys_no_round_is_refused_naming_the_rung_not_an_option_never_given(tmp_path):
    """A script pilot's training cap is its rung's training FLOPs (spec.train_flops), not an option of the user's:
    where it buys no round, TRL's on_train_begin refused with "--train-flops X buys no round", the option of
    ``flopplan train``, which the pilot's user never gave."""
    spec, trainer = _eager_pilot(tmp_path)
    spec = dataclasses.replace(spec, train_flops=1000)
    built = trainer("tiny-s", "eager")
    spec.meter(built)
    with pytest.raises(UserError, match=r"^the rung's training-FLOP cap 1,000 buys no round: the first could cost up "
                                        r"to [\d,]+ training FLOPs \(evaluations excluded\)$"):
        built.train(resume_from_checkpoint=spec.resume_from_checkpoint)


@pytest.mark.parametrize("flag, length, dataset", [("--prompt-len", "8", "train_dataset"),
                                                    ("--eval-prompt-len", "7", "eval_dataset")])
def test_a_script_whose_prompts_are_longer_than_the_race_priced_is_refused_at_its_first_pilot(
        tmp_path, flag, length, dataset):
    """The example's prompts are 9 tokens once TRL applies the chat template. A race priced at shorter prompts
    charges every round more than its rung was sized in: the meter keeps the next round's worst case at the data's
    longest prompt in reserve, so each pilot stops short of its planned steps (read by the analysis as an arm that
    stopped early). Refused before training, in one line naming the length to design with; the race at 9 runs
    (every other test here)."""
    race = tmp_path / "race"
    cut = [*DESIGN[:DESIGN.index("--prompt-len") + 1], length if flag == "--prompt-len" else "9",
           *DESIGN[DESIGN.index("--prompt-len") + 2:]]
    cli("race", "design", *cut, *((flag, length) if flag != "--prompt-len" else ()), "--out", str(race), check=True)
    pilot = (f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE))} --data-dir {shlex.quote(str(tmp_path / 'd'))}"
             f" --models-dir {shlex.quote(str(tmp_path / 'models'))}")
    line = one_line_error(cli("race", "run", str(race), "--json", "--pilot", pilot),
                          f"the trainer's {dataset} has prompts of up to 9 tokens")
    assert f"the race priced at most {length} ({flag}): design the race with {flag} 9" in line
    assert not list(race.glob("pilots/*/seed0/ledger.jsonl"))  # nothing trained


def test_flop_neutral_axes_reach_a_script_pilot_as_grpoconfig_fields(tmp_path):
    """--axis learning_rate and --axis top_p (a GRPOConfig-only field) vary the arms of a script race: each pilot's
    spec sets them; a built-in trainer's knob TRL has no field for is refused for a script pilot."""
    from flopplan.race.user_pilot import write_spec

    race = tmp_path / "race"
    one_model = [a if a != "tiny-s,tiny" else "tiny-s" for a in DESIGN]
    cli("race", "design", *one_model, "--axis", "learning_rate=1e-5,3e-5", "--axis", "top_p=0.9", "--out", str(race),
        check=True)
    design = RaceDesign.load(race)
    seen = set()
    for arm in design.arms:
        spec = write_spec(design, race, arm.name, 0, 0, arm.pilot_budget(design, 0), tmp_path / arm.name)
        fields = spec.overrides()
        assert fields["top_p"] == 0.9 and fields["learning_rate"] == arm.knobs["lr"]
        seen.add(fields["learning_rate"])
    assert seen == {1e-5, 3e-5}
    knob = tmp_path / "knob"
    cli("race", "design", *one_model, "--axis", "train_size=100,200", "--out", str(knob), check=True)
    arm = RaceDesign.load(knob).arms[0]
    with pytest.raises(UserError, match="train-size"):
        write_spec(RaceDesign.load(knob), knob, arm.name, 0, 0, 1, tmp_path / "k")


def test_a_reward_weights_axis_reaches_a_script_as_numbers_and_the_builtin_trainer_checks_its_count(tmp_path):
    """A script has its own reward functions: two weights per arm are designed (they were refused against the
    built-in trainer's one function), reach the pilot as a list of numbers (they reached it as the text '1.0', which
    TRL read as 3 weights), and the built-in trainer refuses the count before any pilot starts."""
    from flopplan.race.user_pilot import script_overrides, write_spec

    race = tmp_path / "race"
    one_model = [a if a != "tiny-s,tiny" else "tiny-s" for a in DESIGN]
    cli("race", "design", *one_model, "--axis", "reward_weights=1+0,0.2+1", "--out", str(race), check=True)
    design = RaceDesign.load(race)
    assert sorted(script_overrides(a)["reward_weights"] for a in design.arms) == [[0.2, 1.0], [1.0, 0.0]]
    spec = write_spec(design, race, design.arms[0].name, 0, 0, 1, tmp_path / "run")
    assert spec.apply({})["reward_weights"] in ([0.2, 1.0], [1.0, 0.0])
    one_line_error(cli("race", "run", str(race), "--json"), "on flopplan's trainer: --reward-weights has 2 weights")
    assert not (race / "pilots").exists()


@pytest.mark.parametrize("body, fragment", [
    ("import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n", "failed (exit 3): boom"),
    ("pass\n", "without a run folder"),
    ("import json, os\nfrom flopplan.race import pilot\nspec = pilot()\n"  # a summary of a run with no budget
     "FLOPS = dict.fromkeys(('rollout', 'learning', 'feedback', 'evaluation', 'total'), 0)\n"
     "json.dump({'flopplan_run_version': 1, 'model': 'm', 'reward': 'rule', 'steps': 1, 'budget_flops': None,\n"
     " 'flops': FLOPS, 'useful_flops': FLOPS}, open(os.path.join(spec.folder, 'summary.json'), 'w'))\n",
     "ignored its budget"),
])
def test_a_bad_pilot_is_one_line_and_keeps_its_folder(tmp_path, body, fragment):
    design = _design(tmp_path / "race")
    one_line_error(cli("race", "run", str(tmp_path / "race"), "--json", "--pilot", _script(tmp_path, body)), fragment)
    folder = tmp_path / "race" / "pilots" / design.arms[0].name / "seed0"
    assert (folder / "pilot.json").is_file() and (folder / "pilot.log").is_file()
    assert json.loads((tmp_path / "race" / "pilot_command.json").read_text())["command"].endswith("pilot_script.py")


def test_kill_int_stops_a_runner_started_with_sigint_ignored(tmp_path):
    """A non-interactive shell starts its background jobs with SIGINT ignored (``flopplan race run DIR &`` in a
    script), and Python then installs no handler: ``kill -INT`` of the runner did nothing, its pilot ran on to the
    end of its rung and the race to its next (a review). The runner takes SIGINT: it passes it on to its pilot
    and stops, saying how to continue."""
    import signal
    import time

    _design(tmp_path / "race")
    log = tmp_path / "pilot.txt"
    body = ("import signal, sys, time\n"
            f"def stop(signum, frame):\n    open({str(log)!r}, 'a').write('SIGINT\\n')\n    sys.exit(130)\n"
            f"signal.signal(signal.SIGINT, stop)\nopen({str(log)!r}, 'a').write('ready\\n')\ntime.sleep(60)\n")
    command = [sys.executable, "-m", "flopplan", "race", "run", str(tmp_path / "race"), "--pilot",
               _script(tmp_path, body)]
    runner = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + 60
    while not (log.is_file() and "ready" in log.read_text()):
        assert time.monotonic() < deadline and runner.poll() is None, runner.communicate()
        time.sleep(0.1)
    runner.send_signal(signal.SIGINT)
    _, err = runner.communicate(timeout=60)
    assert runner.returncode == 130, err.decode()
    assert "interrupted: `flopplan race run" in err.decode() and log.read_text().count("SIGINT") == 1


def test_a_pilot_command_that_cannot_start_is_one_line_and_a_corrected_one_is_taken(tmp_path):
    """The command runs without a shell: a program that is not there, a shell-style environment prefix and
    unbalanced quotes are refused in one line (a traceback before), and with no pilot started the corrected command
    is taken."""
    _design(tmp_path / "race")
    race = str(tmp_path / "race")
    one_line_error(cli("race", "run", race, "--json", "--pilot", "no-such-program-flopplan x.py"),
                   "cannot start 'no-such-program-flopplan'")
    one_line_error(cli("race", "run", race, "--json", "--pilot", "OMP_NUM_THREADS=1 python x.py"),
                   "is an environment setting, and the pilot command runs without a shell")
    one_line_error(cli("race", "run", race, "--json", "--pilot", "python 'x.py"), "cannot be split")
    body = "import sys\nprint('ran', file=sys.stderr)\nsys.exit(5)\n"
    one_line_error(cli("race", "run", race, "--json", "--pilot", _script(tmp_path, body)), "failed (exit 5): ran")


def test_a_script_pilot_sent_sigint_alone_is_interrupted_not_failed(tmp_path):
    """A SIGINT sent to one script pilot alone (here by itself: Python then ends on the signal, exit -2, as a
    script whose ``train`` raised the meter's KeyboardInterrupt does) was reported as its failure, exit code 2: it
    is an interruption that the next ``race run`` resumes, one line and exit code 130."""
    _design(tmp_path / "race")
    body = "import os, signal\nos.kill(os.getpid(), signal.SIGINT)\n"
    result = cli("race", "run", str(tmp_path / "race"), "--json", "--pilot", _script(tmp_path, body))
    assert result.returncode == 130, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert " (rung 1) was interrupted by SIGINT (it resumes from its last checkpoint" in line, line
    assert f"`flopplan race run {tmp_path / 'race'}` resumes it (log: " in line, line


STOPS_SHORT = """
import json, sys
from pathlib import Path
from flopplan.race import pilot
from flopplan.runfile import RunSummary
spec = pilot()
buckets = dict.fromkeys(("rollout", "learning", "feedback", "evaluation", "total"), 0)
stop = {"stop": True, "reason": "interrupted"} if sys.argv[1] == "caught" else {}
summary = RunSummary(model="tiny-s", reward="rule", steps=3, budget_flops=spec.budget, flops=buckets,
                     useful_flops=buckets, stop_reason="interrupted after round 3" if stop else "", stop=stop)
Path(spec.folder, "summary.json").write_text(json.dumps(summary.to_data()))
"""


@pytest.mark.parametrize("how", ["caught", "early-stop"])
def test_a_script_pilot_that_exits_0_short_of_its_budget_is_not_left_waiting_for_other_shards(tmp_path, how):
    """A script that catches the meter's KeyboardInterrupt (``try: trainer.train() except KeyboardInterrupt``) and
    exits 0, or that ends its training by a rule of its own, left its pilot short of its budget with exit code 0:
    the runner took it as run and said it was "waiting for 1 pilot of rung 1 run by other shards", exit code 0,
    with no other shard. The first is an interruption (one line, exit code 130, the command that resumes it); the
    second a refusal in one line that says where its run ended and why it must not."""
    _design(tmp_path / "race")
    result = cli("race", "run", str(tmp_path / "race"), "--json", "--pilot", _script(tmp_path, STOPS_SHORT) + f" {how}")
    assert result.returncode == (130 if how == "caught" else 2), (result.returncode, result.stdout, result.stderr)
    line = result.stderr.strip().splitlines()[-1]
    if how == "caught":
        assert " (rung 1) was interrupted by SIGINT (it stopped after its current phase, with a checkpoint)" in line
    else:
        one_line_error(result, "(rung 1) exited 0 short of its budget (its run ended at 0 of ")
        assert "not stopped by its meter" in line, line


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_after_a_pilot_fails_no_other_pilot_starts(tmp_path, jobs):
    """The local pool's worker had taken the next pilot when the first failed, and the runner waited for it to run
    its whole rung before it reported the failure; with two jobs, a failure behind a pilot still running went
    unseen while the pool started the rest. Now no pilot starts once one has failed, the running one stops (as on
    Ctrl-C), and the failure reported is the one that happened, not the stop it caused. (Four pilots: two arms, two
    seeds, each failing at once; with two jobs the first would run for two minutes.)"""
    body = ("import sys, time\nfrom pathlib import Path\nfrom flopplan.race import pilot\nspec = pilot()\n"
            "Path(spec.folder, 'started').write_text('')\n"
            f"first = {jobs} == 2 and spec.arm == 'tiny-s.G4.mu1.rule' and spec.seed == 0\n"
            "time.sleep(120 if first else 0)\nsys.exit(3 if first else 4)\n")
    two_seeds = [{"1": "2", "1.2e10": "4e10"}.get(a, a) for a in DESIGN]
    cli("race", "design", *two_seeds, "--out", str(tmp_path / "race"), check=True)
    one_line_error(cli("race", "run", str(tmp_path / "race"), "--json", "--jobs", jobs, "--pilot",
                       _script(tmp_path, body)), "failed (exit 4)")
    started = list((tmp_path / "race" / "pilots").glob("*/seed*/started"))
    assert 1 <= len(started) <= int(jobs)  # the pilots running when the first failure came (the first of two may
    #                                        be stopped before it gets that far), and no other
    made = list((tmp_path / "race" / "pilots").glob("*/seed*")) + list((tmp_path / "race" / "logs").glob("*.log"))
    assert len(made) <= 2 * int(jobs), made  # a folder and a log for each of those, none for a pilot never started


def test_a_pilot_that_trains_without_the_meter_is_stopped_not_left_to_run_its_ten_million_steps(tmp_path):
    """spec.apply sets max_steps 10^7 and the meter's budget ends the run: a script that applies the config but
    never calls spec.meter trained on for as long as anyone let it (12 minutes and 1766 steps in a review, against
    about 10). TRL's first checkpoint beside a run folder the meter never wrote stops it, in one line. (The script
    stands in for that trainer: it writes the checkpoint folder and keeps running; run to its end, it would leave
    no run folder, a refusal of another kind.)"""
    body = ("import time\nfrom pathlib import Path\nfrom flopplan.race import pilot\nspec = pilot()\n"
            "Path(spec.output_dir, 'checkpoint-1').mkdir(parents=True)\ntime.sleep(120)\n")
    _design(tmp_path / "race")
    one_line_error(cli("race", "run", str(tmp_path / "race"), "--json", "--pilot", _script(tmp_path, body)),
                   "trains without the meter")


def test_a_pilot_that_ran_past_its_budget_is_refused_again_when_the_race_is_run_again(tmp_path):
    """A script that metered with a larger budget than the spec's is refused when it ends; read again by the next
    ``race run`` (or ``race analyze``), its larger run must not pass for a finished rung, nor for the next rungs it
    reaches: refused in one line each time, the folder kept."""
    body = ("import json, os\nfrom flopplan.race import pilot\nspec = pilot()\n"  # ran to 3x the rung, charged 2x
            "FLOPS = dict.fromkeys(('rollout', 'learning', 'feedback', 'evaluation'), 0)\n"
            "FLOPS.update(learning=2 * spec.budget, total=2 * spec.budget)\n"
            "json.dump({'flopplan_run_version': 1, 'model': 'm', 'reward': 'rule', 'steps': 9,\n"
            " 'budget_flops': 3 * spec.budget, 'stop': {'stop': True, 'reason': 'budget', 'message': 'budget'},\n"
            " 'flops': FLOPS, 'useful_flops': FLOPS}, open(os.path.join(spec.folder, 'summary.json'), 'w'))\n")
    _design(tmp_path / "race")
    one_line_error(cli("race", "run", str(tmp_path / "race"), "--json", "--pilot", _script(tmp_path, body)),
                   "ignored its budget")
    for command in (("race", "run", str(tmp_path / "race"), "--json"), ("race", "analyze", str(tmp_path / "race"))):
        one_line_error(cli(*command), "ignored its budget")


def test_a_pilot_command_cannot_change_once_pilots_ran_nor_join_a_builtin_race(tmp_path):
    _design(tmp_path / "race")
    ran = tmp_path / "race" / "pilots" / "a" / "seed0"
    ran.mkdir(parents=True)
    (ran / "config.json").write_text("{}")
    one_line_error(cli("race", "run", str(tmp_path / "race"), "--pilot", "python x.py"), "flopplan's trainer")
    cli("race", "design", *DESIGN[:-4], "--eval-loop", "flopplan", "--budget", "4e10", "--out", str(tmp_path / "two"),
        check=True)  # 2 targets
    one_line_error(cli("race", "run", str(tmp_path / "two"), "--pilot", "python x.py"), "one target")


# -- the example race, killed mid-rung and rerun ------------------------------------------------------------------

def _race(race: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "flopplan", "race", "run", str(race), *args], cwd=race.parent,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})


def in_progress(pilot: Path) -> bool:
    """The pilot has run work since the last step it logged (a kill now loses it)."""
    path = pilot / "progress.jsonl"
    return path.is_file() and path.stat().st_size > 0


@pytest.mark.slow
def test_a_pilot_whose_rounds_cost_less_than_priced_keeps_its_rungs_last_evaluation(tmp_path):
    """Rounds that cost less than priced (here the script's prompts are shorter than the 12 tokens designed; in
    general completions that end early, or evaluations below their worst case) let a rung run more rounds than
    planned, up to its training FLOPs (a pilot's training cap, :mod:`test_race_trl_cap`; before it, past them). The
    analysis cut each pilot's evaluations at the rung's training FLOPs: it dropped the rung's last one and warned that
    the pilot "stopped at 48%" of the top rung (a review's own script). Every evaluation within the rung's budget is
    read. The pilots here also exit 1 once trained, as a process killed or
    crashing in its teardown does: a pilot that finished its rung is done (the race stopped at it)."""
    race = tmp_path / "race"
    longer = [*DESIGN[:DESIGN.index("--prompt-len") + 1], "12", *DESIGN[DESIGN.index("--prompt-len") + 2:]]
    cli("race", "design", *longer, "--budget", "1.5e10", "--out", str(race), check=True)
    crash = tmp_path / "crash_after.py"
    crash.write_text("import os, runpy, sys\nsys.argv = sys.argv[1:]\nrunpy.run_path(sys.argv[0], run_name='__main__')"
                     "\nos._exit(1)\n")
    pilot = (f"{shlex.quote(sys.executable)} {shlex.quote(str(crash))} {shlex.quote(str(EXAMPLE))} --data-dir "
             f"{shlex.quote(str(tmp_path / 'd'))} --models-dir {shlex.quote(str(tmp_path / 'models'))}")
    cli("race", "run", str(race), "--pilot", pilot, check=True)
    cli("race", "analyze", str(race), "--no-plots", check=True)
    design = RaceDesign.load(race)
    target = json.loads((race / "race.json").read_text())["targets"][0]
    assert len(target["curves"]) == len(design.arms)
    for curve in target["curves"]:
        pilot = race / "pilots" / curve["arm"] / "seed0"
        rung = json.loads((pilot / "pilot.json").read_text())["rung"]  # the last rung it ran
        last = json.loads((pilot / "evaluations.jsonl").read_text().splitlines()[-1])
        arm = design.arm(curve["arm"])
        assert last["step"] >= arm.rungs[rung].steps  # the case: cheaper rounds bought rounds beyond the table's,
        # up to the rung's training FLOPs (the cap, spec.train_flops) and no further than a round short of them
        assert design.rung_flops[rung] - arm.rungs[rung].step_flops < last["train_flops"] <= design.rung_flops[rung]
        assert curve["max_flops"] == last["train_flops"]  # and read there
    assert not [w for w in target["warnings"] if "stopped at" in w]


@pytest.mark.slow
def test_a_script_whose_rewards_hold_a_reward_model_gets_the_learned_reward_caveat(tmp_path):
    """The example race, each pilot also scoring with a reward model (``--reward-model``), under a design whose
    reward axis says ``rule`` (the script's own rewards): the pilots' ledgers charge the reward model's forwards
    (feedback) and name it, and the analysis warns that a policy can over-optimise it, naming the arm."""
    design = _design(tmp_path / "race")
    assert {a.axes["reward"] for a in design.arms} == {"rule"}
    pilot = (f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE))} --reward-model tiny-s "
             f"--data-dir {shlex.quote(str(tmp_path / 'data'))} --models-dir {shlex.quote(str(tmp_path / 'models'))}")
    cli("race", "run", str(tmp_path / "race"), "--pilot", pilot, check=True)
    summaries = [json.loads(p.read_text()) for p in (tmp_path / "race").glob("pilots/*/seed*/summary.json")]
    assert summaries and all(s["reward"].startswith("orm:") and s["flops"]["feedback"] > 0 for s in summaries)
    out = cli("race", "analyze", str(tmp_path / "race"), "--no-plots", check=True).stdout
    race = json.loads((tmp_path / "race" / "race.json").read_text())
    rec = race["targets"][0]["recommendation"]
    assert rec["mode"] == "fitted"  # the caveat qualifies a fitted P(best)
    warned = [w for w in race["targets"][0]["warnings"] if "learned reward model" in w]
    assert len(warned) == 1 and f"{rec['arm']} (by its pilots' ledgers)" in warned[0]
    assert "by its pilots' ledgers" in " ".join(out.split())


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["-m accelerate.commands.launch --num_processes 1 --cpu"])  # (the script
# launched directly is the same meter one process hop nearer: its Ctrl-C is test_trl_hook's; ~50 s of CI dropped)
def test_a_script_race_stopped_by_ctrl_c_mid_round_resumes_its_pilot_with_nothing_lost(tmp_path, launcher):
    """Ctrl-C at the runner (SIGINT to it alone, as ``kill -INT``, or Ray's cancel) while a script pilot is
    mid-round: the runner passes it on to the script (past ``accelerate launch``, which would end the script with
    SIGTERM), the pilot's meter finishes the round and checkpoints it, the pilot is not done (its summary says
    interrupted) and the runner stops; the rerun resumes that checkpoint, records no lost work and completes."""
    import signal
    import time

    race = tmp_path / "race"
    design = _design(race)
    pilots = [race / "pilots" / arm.name / "seed0" for arm in design.arms]
    pilot = (f"{shlex.quote(sys.executable)} {launcher} {shlex.quote(str(EXAMPLE))} "
             f"--data-dir {shlex.quote(str(tmp_path / 'data'))} --models-dir {shlex.quote(str(tmp_path / 'models'))}")
    runner = _race(race, "--pilot", pilot)
    deadline = time.monotonic() + 600
    while True:  # a pilot past its baseline and two rounds (no FLOP point until its rung's end), mid-round
        assert runner.poll() is None, runner.stderr.read().decode()[-2000:] if runner.stderr else "ended"
        assert time.monotonic() < deadline, "no pilot reached its third round"
        ready = [p for p in pilots if (p / "metrics.jsonl").is_file()
                 and len((p / "metrics.jsonl").read_text().splitlines()) >= 3
                 and in_progress(p) and not (p / "summary.json").is_file()]
        if ready:
            break
        time.sleep(0.02)
    runner.send_signal(signal.SIGINT)
    _, err = runner.communicate(timeout=300)
    assert runner.returncode == 130 and b"continues the race" in err, err[-2000:]
    stopped = [p for p in pilots if (p / "summary.json").is_file()
               and json.loads((p / "summary.json").read_text())["stop"]["reason"] == "interrupted"]
    assert ready[0] in stopped
    rounds = {p: json.loads((p / "summary.json").read_text())["steps"] for p in stopped}
    for p in stopped:  # no evaluation the interruption added: one at its round only where a FLOP point fell in it
        lines = {m["step"]: m["flops"]["total"] - m["flops"]["evaluation"]
                 for m in map(json.loads, (p / "metrics.jsonl").read_text().splitlines())}
        last, before = lines[rounds[p]], lines.get(rounds[p] - 1, 0)
        points = json.loads((p / "pilot.json").read_text())["eval_points"]
        evaluated = [e["step"] for e in map(json.loads, (p / "evaluations.jsonl").read_text().splitlines())]
        assert rounds[p] not in evaluated or any(before < x <= last for x in points), p

    assert json.loads(cli("race", "run", str(race), "--json", check=True).stdout)["complete"] is True
    for p in stopped:
        s = json.loads((p / "summary.json").read_text())
        assert s["stop"]["reason"] == "budget" and s["steps"] > rounds[p] and s["lost_flops"] == 0, p
        steps = [m["step"] for m in map(json.loads, (p / "metrics.jsonl").read_text().splitlines())]
        assert steps == list(range(0, s["steps"] + 1))  # step 0: the baseline evaluation
    for p in pilots:  # each pilot bought the rounds its rung was planned for: TRL's evaluations were priced as run
        rung = json.loads((p / "pilot.json").read_text())["rung"]
        assert json.loads((p / "summary.json").read_text())["steps"] == design.arm(p.parent.name).rungs[rung].steps


def test_a_failed_pilot_is_named_by_its_signal_and_its_last_line_that_is_not_a_progress_bar(tmp_path):
    """A review's pilot, killed, was reported as "failed (exit -15): Writing model shards: 100%|...": the signal by
    name, and the last line that says something, in what this attempt wrote."""
    from flopplan.race.pilots import failure, log_size

    log = tmp_path / "pilot.log"
    log.write_text("Traceback ...\nRuntimeError: reward server timed out\n"
                   "Writing model shards:  50%|#####     | 1/2\rWriting model shards: 100%|##########| 2/2\n")
    assert failure(-15, log) == ("killed by SIGTERM", "RuntimeError: reward server timed out")
    assert failure(3, tmp_path / "missing.log") == ("exit 3", "(no output)")
    log.write_text("Loading: 100%|##########| 2/2\n")  # nothing but a bar: the bar, rather than nothing
    assert failure(1, log) == ("exit 1", "Loading: 100%|##########| 2/2")
    # torchrun: each rank's refusal, then the launcher's report framed by rules of "="
    refusal = "the plan generates in calls of 16 rollouts; on 2 processes TRL generates 8 per process"
    log.write_text("".join(f"[rank{r}]:     raise UserError(...)\n[rank{r}]: flopplan.errors.UserError: {refusal}\n"
                           for r in (0, 1)) + "torch...ChildFailedError:\n" + "=" * 60 + "\nRoot Cause:\n" + "=" * 60
                  + "\n")
    assert failure(1, log) == ("exit 1", refusal)
    log.write_text("ChildFailedError\n" + "=" * 60 + "\n")
    assert failure(1, log) == ("exit 1", "ChildFailedError")
    # a pilot killed after a warning (a review's kill -9): the line before it, not the warning's source line
    log.write_text("step 3 done\n/x/transformers/utils/generic.py:1014: FutureWarning: `x` is deprecated\n"
                   "  warnings.warn(\n")
    assert failure(-9, log) == ("killed by SIGKILL", "no error message; its last log line: step 3 done")
    # a built-in pilot SIGKILLed (a held-out team's): its last info line is labelled, not given as the reason
    log.write_text("policy tiny-s: random-initialised (100,928 parameters)\n")
    assert failure(-9, log) == ("killed by SIGKILL", "no error message; its last log line: policy tiny-s: "
                                "random-initialised (100,928 parameters)")
    assert failure(1, log) == ("exit 1", "policy tiny-s: random-initialised (100,928 parameters)")  # exited itself
    # nothing but a warning and bars (a held-out user's kill -9): the warning's message, not its source line
    log.write_text("/x/generic.py:1014: FutureWarning: `x` is deprecated\n  warnings.warn(\nLoading: 100%|#| 2/2\n")
    assert failure(-9, log) == ("killed by SIGKILL",
                                "no error message; its last warning: /x/generic.py:1014: FutureWarning: `x` is "
                                "deprecated")
    # a log kept across attempts: an earlier attempt's refusal, fixed since, is not this attempt's failure
    log.write_text(f"[rank0]: flopplan.errors.UserError: {refusal}\n")
    since = log_size(log)
    with open(log, "a") as f:
        f.write("Traceback ...\nValueError: my reward function blew up\n")
    assert failure(1, log, since) == ("exit 1", "ValueError: my reward function blew up")
    assert failure(1, log) == ("exit 1", refusal)  # (what it named before)


def test_the_watch_stops_a_resumed_pilot_whose_new_checkpoint_has_no_ledger_and_nothing_else(tmp_path):
    """A pilot resumed or continued already has its run folder, so a script that dropped spec.meter shows only in
    the checkpoints it writes: TRL's state without the meter's ledger (saved right after it), seen twice. A
    checkpoint of the metered run, or one a kill left half-written before this pilot started, never stops it."""
    import os

    from flopplan.race.user_pilot import _Unmetered, write_spec
    from flopplan.runfile import TRL_LEDGER as LEDGER_FILE

    design = _design(tmp_path / "race")
    run = tmp_path / "run"
    spec = write_spec(design, tmp_path / "race", design.arms[0].name, 0, 1, 10**9, run)
    (run / "config.json").write_text("{}")
    metered, stale = Path(spec.output_dir, "checkpoint-2"), Path(spec.output_dir, "checkpoint-3")
    for folder in (metered, stale):
        folder.mkdir(parents=True)
        (folder / "trainer_state.json").write_text("{}")
    (metered / LEDGER_FILE).write_text("{}")
    os.utime(stale / "trainer_state.json", (1, 1))  # before the pilot started
    watch = _Unmetered(run, spec, "pilot p")
    assert watch() is None and watch() is None
    fresh = Path(spec.output_dir, "checkpoint-4")
    fresh.mkdir()
    (fresh / "trainer_state.json").write_text("{}")
    assert watch() is None  # the meter may be saving its ledger this moment
    (fresh / LEDGER_FILE).write_text("{}")
    assert watch() is None  # it was
    unmetered = Path(spec.output_dir, "checkpoint-6")
    unmetered.mkdir()
    (unmetered / "trainer_state.json").write_text("{}")
    assert watch() is None
    said = watch()
    assert said is not None and said.startswith("pilot p trains without the meter (checkpoint-6 has TRL's state")
