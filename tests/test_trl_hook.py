"""``flopplan.trl.meter`` on a user's own TRL script (examples/trl_grpo.py, written as TRL's docs write one): the
ledger equals what executed (FlopCounterMode plus its named blind spots) phase by phase, with eager and SDPA
attention, LoRA and full fine-tuning, chat and plain prompts, two reward functions and a reward model, beta > 0,
mu > 1 and TRL's evaluation on; the budget stops it before a round that might not fit, it resumes with its ledger,
two processes agree; the flops/* metrics reach TensorBoard's event files; what cannot be priced is refused at
attach time with one line and nothing written. vLLM's charging is checked on recorded outputs (no vLLM here)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, cli, kill_group_when, sigint_in_round_2

from flopplan.errors import UserError

EXAMPLE = ROOT / "examples" / "trl_grpo.py"
COMMON = ["--max-completion-length", "8", "--rows", "24", "--beta", "0.04", "--num-iterations", "2"]


def _save_models(root: Path, models: tuple) -> Path:
    """Random-initialised models ``(folder, spec, seed)`` saved as local folders (no downloads), with the built-in
    character tokenizer and a chat template."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from flopplan.grpo.codecs import hf_char_tokenizer
    from flopplan.measure.models import build_model

    tokenizer = hf_char_tokenizer()
    tokenizer.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                               "{% if add_generation_prompt %}assistant: {% endif %}")
    for name, spec, seed in models:
        model = build_model(spec, device="cpu", dtype=torch.float32, seed=seed)
        configs = [model.config] + ([model.generation_config] if name == "policy" else [])
        for config in configs:
            config.pad_token_id, config.eos_token_id = tokenizer.pad_token_id, tokenizer.eos_token_id
            config.bos_token_id = tokenizer.bos_token_id
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    return root


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny policy and the tiny reward model (:func:`_save_models`)."""
    pytest.importorskip("torch")
    from flopplan.recipe import Recipe, RewardSystem

    return _save_models(tmp_path_factory.mktemp("models"), (("policy", Recipe(policy="tiny").policy_spec, 0),
                                                             ("orm", RewardSystem.parse("orm:tiny").spec(), 1)))


def _example():
    spec = importlib.util.spec_from_file_location("trl_grpo_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(tiny: Path, where: Path, *args: str):
    """The example script, in this process (TRL's imports are paid once)."""
    return _example().main(["--model", str(tiny / "policy"), "--output-dir", str(where / "trl"),
                            "--out", str(where / "run"), *args])


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def _exact(summary: dict) -> None:
    assert summary["measured_equals_closed_form"] is True
    for unit, values in summary["measured_by_unit"].items():
        assert values["measured"] == values["closed_form"] > 0, unit
    assert summary["engine_checks"]["num_tokens"]["equal"] is True
    assert summary["engine_checks"]["outside_units"] == {"flops": 0, "none": True}  # nothing ran uncharged


SCENARIOS = {
    "eager, LoRA, chat": ["--attn", "eager", "--eval"],
    "sdpa, LoRA, chat": ["--attn", "sdpa", "--eval"],
    "sdpa, full, plain, reward model": ["--attn", "sdpa", "--full", "--plain", "--eval", "--reward-model", "orm"],
}


@pytest.mark.slow
def test_a_users_script_is_metered_exactly(tiny, tmp_path):
    """Three runs of the same script: every unit's ledger equals FlopCounterMode plus its named blind spots (CPU
    SDPA counts 0 in FlopCounterMode, in-place addmm_ too); eager and SDPA agree on every phase but the update,
    where the fused kernel's backward recomputes the score matrix (2.5x the attention forward instead of 2x)."""
    runs = {}
    for name, args in SCENARIOS.items():
        args = [a if a != "orm" else str(tiny / "orm") for a in args]
        report = ["--report-to", "tensorboard"] if name.startswith("eager") else []
        _run(tiny, tmp_path / str(len(runs)), *COMMON, "--max-steps", "4", "--measure", *args, *report)
        runs[name] = tmp_path / str(len(runs)) / "run"
        summary = _summary(runs[name])
        _exact(summary)
        assert summary["flops"]["evaluation"] > 0 and summary["steps"] == 2
        assert cli("report", str(runs[name])).returncode == 0
    eager, sdpa = (_summary(runs[n])["phases"] for n in ("eager, LoRA, chat", "sdpa, LoRA, chat"))
    assert {p: v for p, v in eager.items() if p != "update"} == {p: v for p, v in sdpa.items() if p != "update"}
    assert sdpa["update"]["executed"] > eager["update"]["executed"]
    blind = [c["shapes"]["blind_spots"]["cpu_sdpa"] for line in
             map(json.loads, (runs["sdpa, LoRA, chat"] / "ledger.jsonl").read_text().splitlines())
             for c in line["charges"]]
    assert sum(blind) > 0  # named, not dropped
    full = _summary(runs["sdpa, full, plain, reward model"])
    assert full["flops"]["feedback"] > 0 and full["phases"]["eval.reward"]["executed"] > 0
    # the script built its models: whether their weights are trained is not known (it wrote false, a claim)
    assert full["random_init_policy"] is None and full["random_init_reward_model"] is None
    assert "the reward model's weights are the script's: whether they are trained is not recorded" in cli(
        "report", "--no-plot", str(runs["sdpa, full, plain, reward model"])).stdout
    # the ledger names the reward the trainer held (RACE's learned-reward caveat reads it from a script's pilots)
    assert full["reward"].startswith("orm:") and _summary(runs["sdpa, LoRA, chat"])["reward"] == "rule"
    _tensorboard_has_the_ledger(tmp_path / "0" / "trl", _summary(runs["eager, LoRA, chat"]))


def _tensorboard_has_the_ledger(output: Path, summary: dict) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = [EventAccumulator(str(p.parent)).Reload() for p in output.rglob("events.out.tfevents.*")]
    scalars = {tag: acc.Scalars(tag) for acc in events for tag in acc.Tags()["scalars"]}
    # the last event (the end of training) holds the run's totals, bucket by bucket (float32 events)
    for bucket in ("total", "rollout", "learning", "evaluation"):
        assert scalars[f"train/flops/{bucket}"][-1].value == pytest.approx(summary["flops"][bucket], rel=1e-6)
    assert summary["flops"]["evaluation"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["llama", "gemma2"])
def test_a_llama_or_gemma2_policy_is_metered_exactly(tmp_path, model_type):
    """Two families the meter had not run here (models.md said so; two held-out probes metered them exactly): a
    Llama, and a Gemma 2 whose 4-token window every prompt crosses, each the tiny policy's size, under eager
    attention, LoRA, beta and two iterations."""
    pytest.importorskip("torch")
    from flopplan.arch import REGISTRY, spec_from_config

    tiny = REGISTRY["tiny"]
    config = {"model_type": model_type, "hidden_size": tiny.hidden_size, "intermediate_size": tiny.intermediate_size,
              "num_hidden_layers": tiny.num_layers, "num_attention_heads": tiny.num_heads,
              "num_key_value_heads": tiny.num_kv_heads, "head_dim": tiny.head_dim, "vocab_size": tiny.vocab_size,
              "max_position_embeddings": tiny.max_position_embeddings,
              **({"sliding_window": 4} if model_type == "gemma2" else {})}
    spec = spec_from_config(config, f"tiny-{model_type}")
    assert (spec.family, spec.sliding_window) == (model_type, 4 if model_type == "gemma2" else None)
    models = _save_models(tmp_path / "models", (("policy", spec, 0),))
    _run(models, tmp_path, *COMMON, "--max-steps", "2", "--measure", "--attn", "eager")
    _exact(_summary(tmp_path / "run"))


@pytest.mark.slow
def test_an_moe_policy_is_metered_exactly(tmp_path):
    """tiny-moe (Qwen3-MoE) loaded as TRL loads a model: transformers' default grouped_mm experts, which the meter
    reads from the model and charges; FlopCounterMode misses their matmuls, counted apart by name."""
    pytest.importorskip("torch")
    from flopplan.arch import REGISTRY

    models = _save_models(tmp_path / "models", (("policy", REGISTRY["tiny-moe"], 0),))
    _, flops = _run(models, tmp_path, *COMMON, "--max-steps", "2", "--measure", "--attn", "eager")
    assert flops.recipe.experts == "grouped_mm" and flops.recipe.policy_spec.moe is not None
    summary = _summary(tmp_path / "run")
    _exact(summary)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["conventions"]["experts_implementation"] \
        == "grouped_mm"
    blind = [c["shapes"]["blind_spots"]["grouped_mm"] for line in
             map(json.loads, (tmp_path / "run" / "ledger.jsonl").read_text().splitlines()) for c in line["charges"]]
    assert all(b > 0 for b in blind)  # every unit ran the grouped experts


@pytest.mark.slow
def test_the_budget_stops_the_script_and_it_resumes_with_its_ledger(tiny, tmp_path, capsys):
    budget = 1_600_000_000
    _, meter = _run(tiny, tmp_path, *COMMON, "--attn", "eager", "--budget", str(budget))
    s = _summary(tmp_path / "run")
    # a held-out team's script stopped short of max_steps without a word (the stop only in summary.json)
    assert f"flopplan: the run stopped, its budget spent: {s['stop_reason']}\n" in capsys.readouterr().err
    assert s["stop"]["reason"] == "budget" and s["flops"]["total"] <= budget
    assert s["flops"]["total"] + s["stop"]["bound_flops"] > budget  # it stopped only because the next might not fit
    assert meter.decision.stop and meter.ledger.spent == s["flops"]["total"]
    logs = {p.name: p.read_bytes() for p in (tmp_path / "run").glob("*.jsonl")}
    # killed after its final checkpoint, before its summary: resumed at the same budget, it runs no round (the
    # Trainer runs one before it reads should_training_stop; a Ray retry of a race pilot overran its budget so)
    (tmp_path / "run" / "summary.json").unlink()
    _, same = _run(tiny, tmp_path, *COMMON, "--attn", "eager", "--budget", str(budget), "--resume")
    again = _summary(tmp_path / "run")
    assert same.rounds == s["steps"] == again["steps"] and again["flops"]["total"] == s["flops"]["total"] <= budget
    assert again["stop"]["reason"] == "budget"
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").glob("metrics.jsonl")} == {
        "metrics.jsonl": logs["metrics.jsonl"]}
    forgot = tmp_path / "forgot.py"  # the usual script's call: trainer.train(), the checkpoint not passed
    forgot.write_text(EXAMPLE.read_text().replace("trainer.train(resume_from_checkpoint=True if args.resume else None)",
                                                  "trainer.train()"))
    spec = importlib.util.spec_from_file_location("trl_grpo_forgot", forgot)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    with pytest.raises(UserError, match="the trainer starts at step 0 although checkpoint-"):
        script.main(["--model", str(tiny / "policy"), "--output-dir", str(tmp_path / "trl"), "--out",
                     str(tmp_path / "run"), *COMMON, "--attn", "eager", "--budget", str(2 * budget), "--resume"])
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").glob("*.jsonl")} == logs  # nothing written
    _, more = _run(tiny, tmp_path, *COMMON, "--attn", "eager", "--budget", str(2 * budget), "--resume")
    assert more.rounds == json.loads((tmp_path / "run" / "summary.json").read_text())["steps"]
    r = _summary(tmp_path / "run")
    assert r["steps"] > s["steps"] and r["flops"]["total"] + r["lost_flops"] <= 2 * budget
    assert [m["step"] for m in map(json.loads, (tmp_path / "run" / "metrics.jsonl").read_text().splitlines())] == \
        list(range(1, r["steps"] + 1))
    # resumed without budget=, the run goes on with its own (it ran to max_steps unguarded: 1.52x its budget in a
    # held-out user's run), and a budget below what it charged is refused (it was accepted, the summary over it)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["budget_flops"] == 2 * budget  # recorded
    (tmp_path / "run" / "summary.json").unlink()
    _, kept = _run(tiny, tmp_path, *COMMON, "--attn", "eager", "--resume")
    k = _summary(tmp_path / "run")
    assert kept.ledger.budget_flops == 2 * budget and k["stop"]["reason"] == "budget" and k["steps"] == r["steps"]
    with pytest.raises(UserError, match=rf"^the budget of {budget:,} FLOPs is below the {r['flops']['total']:,} "
                                        "FLOPs this run charged by checkpoint-"):
        _run(tiny, tmp_path, *COMMON, "--attn", "eager", "--budget", str(budget), "--resume")


@pytest.mark.slow
def test_a_run_killed_before_its_first_checkpoint_starts_again_and_charges_what_was_lost(tiny, tmp_path,
                                                                                         monkeypatch):
    """meter(resume=True) with no complete checkpoint (the run was killed before its first was written to the end;
    a race pilot resumed so): the run starts again from step 0, its logs start empty (no step twice), and what the
    killed attempts spent is lost work, charged; a second such kill adds to it, and lost work that leaves no round
    ends the run on its budget with its summary. Each checkpoint's ledger is written before TRL's state, so that a
    checkpoint is complete before TRL deletes the older ones (save_total_limit 1 would otherwise leave none)."""
    from transformers import TrainerState

    ledger_first = []
    save_state = TrainerState.save_to_json

    def saved_after_the_ledger(self, path):
        ledger_first.append((Path(path).parent / "flopplan_ledger.json").is_file())
        return save_state(self, path)

    monkeypatch.setattr(TrainerState, "save_to_json", saved_after_the_ledger)
    budget = 1_600_000_000
    _, meter = _run(tiny, tmp_path, *COMMON, "--attn", "eager", "--budget", str(budget))
    assert ledger_first and all(ledger_first)
    assert meter.notes == []  # rounds of 2 optimizer steps: TRL's token count checked where a round ends
    run = tmp_path / "run"
    first, first_steps = _summary(run)["flops"]["total"], _summary(run)["steps"]
    restarted = tmp_path / "restarted.py"  # as a race pilot with no checkpoint: trainer.train() from step 0
    restarted.write_text(EXAMPLE.read_text().replace(
        "trainer.train(resume_from_checkpoint=True if args.resume else None)", "trainer.train()"))
    spec = importlib.util.spec_from_file_location("trl_grpo_restarted", restarted)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)

    def killed_and_resumed() -> dict:
        for checkpoint in (tmp_path / "trl").glob("checkpoint-*"):  # as if the kill came before any was complete
            (checkpoint / "trainer_state.json").unlink()
        (run / "summary.json").unlink()
        _, meter = script.main(["--model", str(tiny / "policy"), "--output-dir", str(tmp_path / "trl"), "--out",
                                str(run), *COMMON, "--attn", "eager", "--budget", str(3 * budget), "--resume"])
        assert meter.notes[0] == "no checkpoint yet: the run starts again" and len(meter.notes) == 2, meter.notes
        return _summary(run)

    again = killed_and_resumed()
    assert again["lost_flops"] == first and again["lost_charged"] and again["engine_checks"]["num_tokens"]["equal"]
    assert again["flops"]["total"] + first <= 3 * budget and again["steps"] > first_steps
    for log in ("ledger.jsonl", "metrics.jsonl"):
        assert [json.loads(line)["step"] for line in (run / log).read_text().splitlines()] == \
            list(range(1, again["steps"] + 1)), log
    last = killed_and_resumed()  # killed again before a checkpoint: the first attempt's loss is not forgotten
    assert last["lost_flops"] == first + again["flops"]["total"] > 3 * budget - first
    assert last["steps"] == 0 and last["stop"]["reason"] == "budget" and (run / "ledger.jsonl").read_text() == ""


def _interrupted_in_round_2(command: list[str], run: Path, rank: str | None = None) -> str:
    """:func:`helpers.sigint_in_round_2`, checking that the script ended with KeyboardInterrupt; its stderr."""
    code, err = sigint_in_round_2(command, run, rank)
    assert code != 0 and "KeyboardInterrupt" in err, err[-2000:]
    return err


def _script(tiny: Path, tmp_path: Path, *args: str) -> list[str]:
    return [sys.executable, str(EXAMPLE), "--model", str(tiny / "policy"), "--output-dir", str(tmp_path / "trl"),
            "--out", str(tmp_path / "run"), *COMMON, "--attn", "eager", *args]


@pytest.mark.slow
def test_ctrl_c_stops_the_script_after_its_round_with_a_checkpoint_and_the_resumed_run_loses_nothing(tiny, tmp_path):
    """A SIGINT in round 2 or later of the user's script: the round in progress is finished, checkpointed and
    recorded as the stop (summary: interrupted), then the script ends with KeyboardInterrupt (its code after
    train() does not run). Resumed from that checkpoint, the run records no lost work and its step log runs on
    without a gap."""
    run, trl = tmp_path / "run", tmp_path / "trl"
    _interrupted_in_round_2(_script(tiny, tmp_path, "--max-steps", "200"), run)
    stopped = _summary(run)
    rounds = stopped["steps"]
    assert stopped["stop"]["reason"] == "interrupted" and 2 <= rounds < 100
    assert (trl / f"checkpoint-{2 * rounds}" / "flopplan_ledger.json").is_file()  # 2 optimizer steps a round
    assert not (run / "progress.jsonl").is_file() or not (run / "progress.jsonl").read_text().strip()

    _, more = _run(tiny, tmp_path, *COMMON, "--attn", "eager", "--max-steps", str(2 * rounds + 4), "--resume")
    resumed = _summary(run)
    assert resumed["stop"]["reason"] == "steps" and resumed["steps"] == rounds + 2 == more.rounds
    assert resumed["lost_flops"] == 0 and resumed["flops"]["total"] > stopped["flops"]["total"]
    metrics = run / "metrics.jsonl"
    assert [m["step"] for m in map(json.loads, metrics.read_text().splitlines())] == list(range(1, rounds + 3))


@pytest.mark.slow
def test_ctrl_c_in_the_last_round_leaves_the_run_finished_and_still_stops_the_script(tiny, tmp_path):
    """max_steps ends the run with round 2: a SIGINT during it does not turn the finished run into an interrupted
    one (a resume would run past its last round), and the script still ends with KeyboardInterrupt."""
    _interrupted_in_round_2(_script(tiny, tmp_path, "--max-steps", "4"), tmp_path / "run")
    s = _summary(tmp_path / "run")
    assert s["stop"]["reason"] == "steps" and s["steps"] == 2


@pytest.mark.slow
def test_two_processes_agree(tiny, tmp_path):
    """torchrun, 2 CPU processes (gloo): each charges its shard; the ledger is their sum, equal to what executed on
    both, and both stop on the same round."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          str(EXAMPLE), "--model", str(tiny / "policy"), "--output-dir", str(tmp_path / "trl"),
                          "--out", str(tmp_path / "run"), *COMMON, "--batch-size", "4", "--attn", "sdpa",
                          "--budget", "1600000000", "--measure"],
                         capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    s = _summary(tmp_path / "run")
    _exact(s)
    assert s["stop"]["reason"] == "budget" and s["within_budget"]


@pytest.mark.slow
def test_ctrl_c_on_one_of_two_processes_stops_both_after_the_same_round_with_its_checkpoint(tiny, tmp_path):
    """torchrun, 2 CPU processes: a SIGINT to rank 1 alone reaches rank 0 through the round's reduction, so both
    stop after the same round (a checkpoint needs both), the summary rank 0 writes says interrupted, and both
    scripts end with KeyboardInterrupt (rank 0's went on as if the run were done: a review)."""
    run, trl = tmp_path / "run", tmp_path / "trl"
    err = _interrupted_in_round_2([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                                   "2", str(EXAMPLE), "--model", str(tiny / "policy"), "--output-dir", str(trl),
                                   "--out", str(run), *COMMON, "--batch-size", "4", "--attn", "sdpa", "--max-steps",
                                   "400"], run, "1")
    for rank in (0, 1):  # every process's script stops (rank 0's train() had returned as if the run were done)
        assert f"[rank{rank}]: KeyboardInterrupt: interrupted after round" in err, err[-3000:]
    s = _summary(run)
    assert s["stop"]["reason"] == "interrupted" and 2 <= s["steps"] < 200
    assert (trl / f"checkpoint-{2 * s['steps']}" / "flopplan_ledger.json").is_file()


def _executed(path: Path, after: int, skip: set[int] = frozenset()) -> tuple[int, set[int]]:
    """Executed FLOPs of a step log's lines of steps after ``after`` and not in ``skip``, read from the JSON as
    written; and the steps seen."""
    lines = [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []
    lines = [x for x in lines if x["step"] > after and x["step"] not in skip]
    return sum(v for x in lines for c in x["charges"] for v in c["executed"].values()), {x["step"] for x in lines}


@pytest.mark.slow
def test_a_kill_mid_round_on_two_processes_loses_both_processes_shares(tiny, tmp_path):
    """torchrun, 2 CPU processes, killed (SIGKILL to both) mid-round once rank 1 has run a unit of it: a process
    knows only its own share of a round until the round commits, and rank 0's share alone was on disk, so the
    resumed run charged half the round in progress. Resumed from the last checkpoint, the lost work is every
    line after it plus both processes' shares, read here from the files the kill left."""
    run, trl = tmp_path / "run", tmp_path / "trl"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(EXAMPLE),
               "--model", str(tiny / "policy"), "--output-dir", str(trl), "--out", str(run), *COMMON,
               "--batch-size", "4", "--attn", "sdpa"]
    proc = subprocess.Popen([*command, "--max-steps", "400"], cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)

    def both_shares_on_disk() -> bool:
        committed = _executed(run / "ledger.jsonl", 0)[1]
        return bool(committed) and all(_executed(run / name, 0, committed)[0] > 0
                                       for name in ("progress.jsonl", "progress.rank1.jsonl"))

    kill_group_when(proc, both_shares_on_disk)
    checkpoints = sorted(int(c.name.split("-")[1]) for c in trl.glob("checkpoint-*")
                         if (c / "trainer_state.json").is_file() and (c / "flopplan_ledger.json").is_file())
    rounds = checkpoints[-1] // 2  # rounds of 2 optimizer steps (--num-iterations 2)
    logged, steps = _executed(run / "ledger.jsonl", rounds)
    rank0, _ = _executed(run / "progress.jsonl", rounds, steps)
    rank1, _ = _executed(run / "progress.rank1.jsonl", rounds, steps)
    assert rank0 > 0 and rank1 > 0
    resumed = subprocess.run([*command, "--max-steps", str(2 * rounds + 2), "--resume"], capture_output=True,
                             text=True, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    s = _summary(run)
    assert s["lost_flops"] == logged + rank0 + rank1 and s["steps"] == rounds + 1
    assert not list(run.glob("progress.rank*.jsonl")) or _executed(run / "progress.rank1.jsonl", rounds + 1)[0] == 0


def _grpo_args(tmp_path: Path, **changes):
    """:func:`_trainers`' GRPOConfig (2 steps of 8 rows, 4 generations, 8 completion tokens), with changes."""
    from trl import GRPOConfig

    return GRPOConfig(**{"output_dir": str(tmp_path / "trl"), "per_device_train_batch_size": 8, "num_generations": 4,
                         "max_completion_length": 8, "use_cpu": True, "report_to": "none", "max_steps": 2, **changes})


def _trainers(tiny: Path, tmp_path: Path):
    """A maker of GRPOTrainers of the tiny policy on 16 chat rows of the example's data (2 steps), with changes."""
    from datasets import load_dataset
    from trl import GRPOTrainer

    example = _example()
    example.write_dataset(tmp_path / "data.parquet", 16, chat=True)
    data = load_dataset("parquet", data_files=str(tmp_path / "data.parquet"), split="train")
    args = _grpo_args(tmp_path)

    def trainer(**changes):
        kwargs = {"model": str(tiny / "policy"), "reward_funcs": [example.accuracy_reward], "args": args,
                  "train_dataset": data, **changes}
        return GRPOTrainer(**kwargs)

    return trainer


def _bounds_and_rounds(metered):
    """The guard's bound before each round and what each round executed, filled as ``metered``'s rounds commit."""
    bounds, executed = [metered.next_round_bound()], []
    commit = metered.commit

    def committed(reduce):
        out = commit(reduce)
        executed.append(metered.last_round_flops)
        bounds.append(metered.next_round_bound())
        return out

    metered.commit = committed
    return bounds, executed


@pytest.mark.slow
def test_a_reward_models_read_of_chat_prompts_is_known_before_training(tiny, tmp_path):
    """A reward model reads chat prompts through its own chat template, which can be longer than the policy's (here
    by a preamble of 60 tokens). That read was given as 0 before training, so the guard bounded the first round at
    the policy's prompt read (332,947,456 FLOPs here, against the 669,306,880 the round executed: a budget between
    the two was overspent) and learned the template afterwards as tokens read beyond prompt and completion; and a
    race pilot's length check let through a reward model that outgrew ``--reward-overhead``. The read is now known
    first, for every prompt of the data, and equals what the reward model executed: each row's tokens are its
    prompt's read (the reward model's template over the messages and an empty assistant turn) plus its
    completion's text, as TRL decodes and the reward tokenizer reads it. The guard's bound holds every round
    (681,205,760), and what it learns beyond the prompt's read is the completion's retokenisation alone (0 with
    one tokenizer), so the template is not counted twice."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from flopplan.engines.trl_hook import meter as attach
    from flopplan.engines.trl_prompts import reward_prompt_reads

    orm = str(tiny / "orm")
    reward_tokenizer = AutoTokenizer.from_pretrained(orm)
    preamble = "0123456789" * 6  # 60 tokens of the character tokenizer (its letters and spaces read as none)
    reward_tokenizer.chat_template = preamble + "{% for m in messages %}>{{ m['content'] }}>{% endfor %}"
    model = AutoModelForSequenceClassification.from_pretrained(orm, num_labels=1)
    trainer = _trainers(tiny, tmp_path)(reward_funcs=[_example().accuracy_reward, model],
                                        reward_processing_classes=[None, reward_tokenizer])
    checked, reads, rows = [], [], []
    metered = attach(trainer, check_prompts=lambda *lengths: checked.append(lengths))
    bounds, executed = _bounds_and_rounds(metered)
    trainer.reward_funcs[1].register_forward_pre_hook(
        lambda module, args, kwargs: reads.extend(kwargs["attention_mask"].sum(1).tolist()), with_kwargs=True)
    score = trainer._generate_and_score_completions

    def scored(inputs):
        out = score(inputs)
        texts = trainer.processing_class.batch_decode([ids[mask.bool()] for ids, mask in
                                                       zip(out["completion_ids"], out["completion_mask"], strict=True)],
                                                      skip_special_tokens=True)
        rows.extend(zip([x["prompt"] for x in inputs], texts, strict=True))
        return out

    trainer._generate_and_score_completions = scored
    trainer.train()
    prompts = list(trainer.train_dataset["prompt"])
    assert checked[0][2] == metered.reward_prompt_max == max(reward_prompt_reads(trainer, prompts)) \
        >= checked[0][0] + len(preamble)
    expected = [t + len(reward_tokenizer(text=c, add_special_tokens=False)["input_ids"]) for t, c in
                zip(reward_prompt_reads(trainer, [p for p, _ in rows]), (c for _, c in rows), strict=True)]
    assert len(reads) == len(rows) > 0 and reads == expected
    assert len(executed) == 2 and all(0 < e <= b for e, b in zip(executed, bounds, strict=False))
    assert metered.reward_extra == 0  # one tokenizer: nothing read beyond the prompt's read and the completion
    assert not any("tokenizer is not the policy's" in note for note in metered.notes)
    reward_tokenizer.chat_template = None  # TRL's reward call would fail at the first round: refused in one line
    with pytest.raises(UserError, match=r"tokenizer cannot lay out the chat prompts .*: give it a chat template$"):
        reward_prompt_reads(trainer, prompts)


@pytest.mark.slow
def test_a_reward_tokenizer_that_is_not_the_policys_is_in_the_guards_bound_from_the_first_round(tiny, tmp_path):
    """A reward model whose tokenizer is not the policy's reads each completion's decoded text in its own tokens,
    here twice the policy's (each character doubled before it is read). The guard learned that excess only after a
    round had shown it, so its first bound left out a completion's worth of tokens per row (a budget between the
    two was overspent). It now takes the excess from the training prompts' text before the first round (the
    reward tokenizer reads it in twice the policy's tokens: one completion more at its longest), and every round
    stays within the bound taken before it."""
    from tokenizers import normalizers
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from flopplan.engines.trl_hook import meter as attach

    orm = str(tiny / "orm")
    reader = AutoTokenizer.from_pretrained(orm)
    reader.backend_tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Replace(c, c + c) for c in [*map(chr, range(32, 127)), "\n"]])
    reader.add_tokens(["<think>"])
    model = AutoModelForSequenceClassification.from_pretrained(orm, num_labels=1)
    trainer = _trainers(tiny, tmp_path)(reward_funcs=[_example().accuracy_reward, model],
                                        reward_processing_classes=[None, reader])
    metered = attach(trainer)
    assert metered.reward_extra == trainer.args.max_completion_length  # twice the tokens: one completion more
    assert any("reads the training prompts' text in 2.000 times the policy's tokens" in n for n in metered.notes)
    metered.reward_extra = 0
    without = metered.next_round_bound()  # what the guard took before: the prompts' reads and the policy's count
    metered.reward_extra = trainer.args.max_completion_length
    bounds, executed = _bounds_and_rounds(metered)
    trainer.train()
    assert len(executed) == 2 and all(0 < e <= b for e, b in zip(executed, bounds, strict=False))
    assert executed[0] > without  # (the bound before this change)
    assert metered.reward_extra == trainer.args.max_completion_length  # no completion split worse than the text


def test_a_tokenizer_that_reads_otherwise_than_its_folders_file_is_named(tmp_path):
    """A user's script loads a reward model's tokenizer with ``AutoTokenizer``, which for a Qwen2 folder rebuilds it
    with transformers' own class: a folder an older flopplan wrote (a WordLevel character tokenizer) then read its
    rows without spaces, and the meter said only that the reward tokenizer read the prompts in 0.501 times the
    policy's tokens. It now names the tokenizer that reads otherwise than its folder's file, and how to load it as
    saved; the same folder loaded so, and a policy whose tokenizer reads as saved, get no such note."""
    from types import SimpleNamespace

    import torch
    from helpers import old_char_tokenizer
    from transformers import AutoTokenizer, Qwen2Config

    from flopplan.engines.trl_prompts import check_tokenizers
    from flopplan.grpo.codecs import hf_char_tokenizer, load_tokenizer

    class Model(torch.nn.Module):
        def __init__(self, folder):
            super().__init__()
            self.embed = torch.nn.Embedding(32, 4)
            self.config = SimpleNamespace(_name_or_path=str(folder))

        def get_input_embeddings(self):
            return self.embed

    config = Qwen2Config(vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, intermediate_size=32)
    for name, tokenizer in (("policy", hf_char_tokenizer()), ("reward", old_char_tokenizer())):
        config.save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
    policy, reward = Model(tmp_path / "policy"), Model(tmp_path / "reward")

    def trainer(reader):
        return SimpleNamespace(model=policy, processing_class=AutoTokenizer.from_pretrained(tmp_path / "policy"),
                               reward_funcs=[reward], reward_processing_classes=[reader])

    notes = check_tokenizers(trainer(AutoTokenizer.from_pretrained(tmp_path / "reward")))
    assert len(notes) == 1 and notes[0].startswith("the reward model Model's tokenizer reads text in other ids")
    assert "load_tokenizer(folder)" in notes[0] and str(tmp_path / "reward") in notes[0]
    assert check_tokenizers(trainer(load_tokenizer(tmp_path / "reward"))) == []


def test_the_reward_tokenizers_excess_is_measured_on_the_prompts_text_whatever_starts_each_text():
    """:func:`retokenising` on real tokenizers: a policy tokenizer that starts every text with a token of its own
    (SentencePiece's word start, here a normalizer's) counted it once per prompt, so a reward tokenizer that reads
    each character twice read the prompts in 1.75 times the policy's tokens and the estimate fell a quarter short
    of the completion it stands for; read in chunks, the ratio is within 3 % of 2. Prompts with no text give no
    estimate, and the note says so rather than stating a ratio; the policy's own tokenizer gives neither."""
    from types import SimpleNamespace

    import torch
    from tokenizers import normalizers

    from flopplan.engines.trl_prompts import retokenising
    from flopplan.grpo.codecs import hf_char_tokenizer

    policy, doubled = hf_char_tokenizer(), hf_char_tokenizer()
    policy.backend_tokenizer.normalizer = normalizers.Prepend("_")  # one more token at each text's start
    doubled.backend_tokenizer.normalizer = normalizers.Sequence(
        [normalizers.Replace(c, c + c) for c in [*map(chr, range(32, 127)), "\n"]])
    doubled.add_tokens(["<think>"])

    def trainer(reader):
        return SimpleNamespace(processing_class=policy, reward_funcs=[torch.nn.Linear(1, 1)],
                               reward_processing_classes=[reader])

    prompts = [f"{i} + {i % 7} =" for i in range(400)]
    extra, notes = retokenising(trainer(doubled), {"train_dataset": [prompts]}, 100)
    assert 97 <= extra <= 100 and "times the policy's tokens" in notes[0]
    chats = [[{"role": "user", "content": [{"type": "text", "text": p}, {"type": "image"}]}] for p in prompts]
    assert retokenising(trainer(doubled), {"train_dataset": [chats]}, 100)[0] == extra
    empty, notes = retokenising(trainer(doubled), {"train_dataset": [[[{"role": "user", "content": None}]]]}, 100)
    assert empty == 0 and "hold no text" in notes[0]
    assert retokenising(trainer(policy), {"train_dataset": [prompts]}, 100) == (0, [])


def test_checkpoints_and_evaluations_inside_a_round_are_refused_whatever_transformers_calls_the_strategy():
    """transformers 5 gives ``save_strategy`` and ``eval_strategy`` as str enums whose ``str()`` is the member's
    name (``SaveStrategy.STEPS``): the check read ``str(strategy).endswith("steps")``, never true, so an evaluation
    every optimizer step of 2-step rounds was accepted, and the guard, keeping in reserve the evaluations at round
    boundaries only, let such a run spend 157,341,696 FLOPs of a 120,000,000 budget (a held-out user's script)."""
    pytest.importorskip("trl")
    from trl import GRPOConfig

    from flopplan.engines.trl_boundaries import check_boundaries

    def config(**changes):
        return GRPOConfig(output_dir="unused", use_cpu=True, report_to="none", **changes)

    with pytest.raises(UserError, match=r"^GRPOConfig eval_steps \(1\) must be a multiple of the 2 optimizer steps"):
        check_boundaries(config(eval_strategy="steps", eval_steps=1), 2, True)
    with pytest.raises(UserError, match=r"^GRPOConfig save_steps \(3\) must be a multiple of the 2 optimizer steps"):
        check_boundaries(config(save_strategy="steps", save_steps=3), 2, False)
    check_boundaries(config(eval_strategy="steps", eval_steps=4, save_steps=6), 2, True)  # boundaries: accepted
    check_boundaries(config(eval_strategy="steps", eval_steps=1), 2, False)  # no evaluation data: none runs
    # a share of the run is transformers' math.ceil(max_steps * share) steps (it was refused as "a multiple of the
    # 1 optimizer steps a round takes" whatever it came to); where the run's length is not known yet it waits
    check_boundaries(config(eval_strategy="steps", eval_steps=0.5, save_steps=0.5), 1, True, 4)
    check_boundaries(config(eval_strategy="steps", eval_steps=0.25, save_steps=0.5), 2, True, 16)
    with pytest.raises(UserError, match=r"^GRPOConfig save_steps \(0.3 of 10 optimizer steps: 3\) must be a multiple"):
        check_boundaries(config(save_strategy="steps", save_steps=0.3), 2, False, 10)
    check_boundaries(config(save_strategy="steps", save_steps=0.3), 2, False)  # (epochs decide: train() checks)


def test_the_guard_keeps_in_reserve_only_the_evaluations_due_before_its_next_decision():
    """At a round boundary the guard keeps in reserve this boundary's evaluation and the next round's end's, each
    where eval_steps makes it due, and the one transformers runs at max_steps whatever eval_steps says (a held-out
    user's script: it kept the next round's whatever eval_steps said, so a run evaluating every few rounds stopped
    an evaluation early)."""
    pytest.importorskip("trl")
    from trl import GRPOConfig

    from flopplan.engines.trl_boundaries import evaluations_before_next_round

    def config(**changes):
        return GRPOConfig(output_dir="unused", use_cpu=True, report_to="none", **changes)

    every_two_rounds = config(eval_strategy="steps", eval_steps=4)  # rounds of 2 optimizer steps
    assert [evaluations_before_next_round(every_two_rounds, step, 2, 100) for step in (0, 2, 4, 6)] == [1, 1, 1, 1]
    assert [evaluations_before_next_round(every_two_rounds, step, 2, 6) for step in (2, 4)] == [1, 2]  # at 6: the end
    assert evaluations_before_next_round(every_two_rounds, 2, 2, None) == 1  # (max_steps not known: counted)
    assert evaluations_before_next_round(every_two_rounds, 0, 2, None) == 2
    every_round = config(eval_strategy="steps", eval_steps=2)
    assert [evaluations_before_next_round(every_round, step, 2, 100) for step in (0, 2)] == [2, 2]
    share, epoch = config(eval_strategy="steps", eval_steps=0.25), config(eval_strategy="epoch")
    assert evaluations_before_next_round(share, 2, 2, None) == evaluations_before_next_round(epoch, 2, 2, 100) == 2
    # a share of a run of known length: its steps (25 of 100), as transformers resolves it
    assert [evaluations_before_next_round(share, step, 5, 100) for step in (5, 20, 25)] == [0, 1, 1]


@pytest.mark.slow
def test_a_run_that_ends_inside_a_round_charges_what_that_round_ran(tiny, tmp_path):
    """A round of 2 optimizer steps (steps_per_generation 2) and max_steps 3: TRL generates the second round and
    runs one of its updates, and the meter, which commits at round boundaries, charged none of it (a held-out
    script: 43 % of what ran), while its num_tokens check, made at boundaries only, still read equal. The round in
    progress at the end is now charged (measured equal to the closed form), and TRL's token count is checked at
    the end. It is charged at the last step's end, before the final checkpoint is saved and the step logged (a
    review: charged at the training's end, the checkpoint lacked it, so a resume from it charged the round as lost
    work and its token check read 364 against 278), so a resume from that checkpoint loses nothing."""
    from flopplan.trl import meter

    make = _trainers(tiny, tmp_path)
    held_out = make().train_dataset.select(range(2))
    trainer = make(args=_grpo_args(tmp_path, steps_per_generation=2, max_steps=3), eval_dataset=held_out)
    metered = meter(trainer, out=tmp_path / "run", measure=True)
    trainer.train()
    s = _summary(tmp_path / "run")
    _exact(s)
    assert metered.tokens == trainer.state.num_input_tokens_seen > 0 and s["steps"] == 2
    trainer.evaluate()  # the script's own evaluation after train(): checked, charged, and recorded in the run folder
    evaluated = _summary(tmp_path / "run")  # (it was charged in memory only: the summary kept the total before it,
    _exact(evaluated)  # and a resume charged it as lost work)
    assert evaluated["flops"]["total"] == s["flops"]["total"] + evaluated["flops"]["evaluation"] == metered.ledger.spent
    assert evaluated["flops"]["evaluation"] > 0 and evaluated["steps"] == 2
    lines = [json.loads(x) for x in (tmp_path / "run" / "ledger.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [1, 2, 2] and lines[-1]["charges"][0]["unit"] == "eval"
    lines = lines[:2]
    by_unit = [{c["unit"]: sum(c["executed"].values()) for c in line["charges"]} for line in lines]
    assert [line["step"] for line in lines] == [1, 2]
    assert by_unit[1]["rollout"] == by_unit[0]["rollout"] > 0 and 2 * by_unit[1]["update"] == by_unit[0]["update"]
    assert any("ended after 1 of its 2 optimizer steps" in note for note in metered.notes)
    saved = json.loads((tmp_path / "trl" / "checkpoint-3" / "flopplan_ledger.json").read_text())
    assert saved["rounds"] == 2 and saved["tokens"] == metered.tokens  # the final checkpoint holds the round
    assert trainer.state.log_history[-1]["flops/total"] == evaluated["flops"]["total"]  # what TRL's logs got (the
    assert trainer.state.log_history[-2]["flops/total"] == s["flops"]["total"]  # evaluation's line, the train's)
    # a resume from that checkpoint is refused: TRL's generation counter starts again at a resume, so its rounds
    # would run a step off the meter's and its checkpoints' (a held-out user's later resume regenerated a round
    # the ledger had counted as used)
    resumed = make(args=_grpo_args(tmp_path, steps_per_generation=2, max_steps=5), eval_dataset=held_out)
    meter(resumed, out=tmp_path / "run", measure=True, resume=True)
    with pytest.raises(UserError, match=r"^checkpoint-3 was saved inside a round \(a round takes 2 optimizer steps\)"
                                        r".*no checkpoint ends a round: start the run again$"):
        resumed.train(resume_from_checkpoint=str(tmp_path / "trl" / "checkpoint-3"))
    assert _summary(tmp_path / "run") == evaluated  # nothing written


@pytest.mark.slow
def test_an_evaluation_the_guard_did_not_reserve_never_overruns_the_budget(tiny, tmp_path):
    """A held-out user's evaluations: the script's trainer.evaluate() before train() ran 120 % of a budget of 5e8
    before train() refused it, and one a callback asked for (control.should_evaluate) took a run to 130 %: neither
    was checked against the budget. One before train() that does not fit is refused with one line, nothing run; one
    a callback asks for that does not fit does not run, and training stops on the budget with its checkpoint (the
    budget's two rounds would have run)."""
    from transformers import TrainerCallback

    from flopplan.trl import meter

    class EvaluateEachStep(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            control.should_evaluate = True

    make = _trainers(tiny, tmp_path)
    held_out = make().train_dataset  # 64 rows: an evaluation costs more than two rounds (it never runs here)
    budget = 2 * meter(make()).next_round_bound()  # two rounds fit, not a round and an evaluation
    trainer = make(args=_grpo_args(tmp_path, save_steps=1), eval_dataset=held_out, callbacks=[EvaluateEachStep()])
    metered = meter(trainer, budget=budget, out=tmp_path / "run")
    with pytest.raises(UserError, match=r"^trainer.evaluate\(\) could cost up to [\d,]+ FLOPs and the budget leaves "
                                        rf"{budget:,}: refused, nothing ran"):
        trainer.evaluate()
    assert metered.ledger.spent == 0
    trainer.train()
    s = _summary(tmp_path / "run")
    assert s["steps"] == 1 and s["flops"]["evaluation"] == 0 and s["within_budget"] and metered.ledger.spent <= budget
    assert s["stop"]["reason"] == "budget"  # (where the guard would have gone on to round 2)
    assert s["stop_reason"].startswith("budget: the evaluation at optimizer step 1 (not run) could cost up to")
    assert any(note.startswith("the evaluation asked for at optimizer step 1 could cost up to") and
               note.endswith("it did not run") for note in s["notes"]), s["notes"]
    assert (tmp_path / "trl" / "checkpoint-1").is_dir()

    # a metric-driven LR scheduler (ReduceLROnPlateau, which needs an eval strategy: one at the run's end here): the
    # training loop's evaluation that does not run returns before transformers steps it on metrics never computed
    # (a KeyError at the budget's stop)
    args = _grpo_args(tmp_path / "plateau", save_steps=1, eval_strategy="steps", eval_steps=100,
                      lr_scheduler_type="reduce_lr_on_plateau")
    trainer = make(args=args, eval_dataset=held_out, callbacks=[EvaluateEachStep()])
    metered = meter(trainer, budget=budget, out=tmp_path / "plateau" / "run")
    trainer.train()
    s = _summary(tmp_path / "plateau" / "run")
    assert s["steps"] == 1 and s["flops"]["evaluation"] == 0 and s["within_budget"] and metered.ledger.spent <= budget
    assert s["stop"]["reason"] == "budget" and (tmp_path / "plateau" / "trl" / "checkpoint-1").is_dir()

    # at max_steps the run ends on its steps, whether or not the evaluation a callback asks for there fits (a
    # held-out user's stop reason read "budget" for a run that had trained every step it was given)
    trainer = make(args=_grpo_args(tmp_path / "last", save_steps=1, max_steps=1), eval_dataset=held_out,
                   callbacks=[EvaluateEachStep()])
    metered = meter(trainer, budget=budget, out=tmp_path / "last" / "run")
    trainer.train()
    s = _summary(tmp_path / "last" / "run")
    assert s["steps"] == 1 and s["flops"]["evaluation"] == 0 and s["within_budget"] and metered.ledger.spent <= budget
    assert s["stop"]["reason"] == "steps", s["stop_reason"]
    assert any(note.startswith("the evaluation asked for at optimizer step 1 could cost up to") for note in s["notes"])

    # a callback's own trainer.evaluate() at on_step_end runs before the meter commits the round (callbacks given
    # to GRPOTrainer come first): the guard counts the round in flight at its bound (a re-check: 109 % of a budget)
    class EvaluateAtStepOne(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                trainer.evaluate()

    small = held_out.select(range(4))
    trainer = make(args=_grpo_args(tmp_path / "flight", save_steps=1), eval_dataset=small,
                   callbacks=[EvaluateAtStepOne()])
    from flopplan.engines.trl_evalguard import EvaluationGuard

    probe = meter(make(eval_dataset=small))
    evaluation = EvaluationGuard(trainer, probe, None, None).bound([small])  # the guard's bound of this one
    budget = evaluation + probe.next_round_bound() - 1  # the round fits, and the evaluation alone; not both
    metered = meter(trainer, budget=budget, out=tmp_path / "flight" / "run")
    trainer.train()
    s = _summary(tmp_path / "flight" / "run")
    assert s["flops"]["evaluation"] == 0 and s["within_budget"] and metered.ledger.spent <= budget
    assert s["stop_reason"].startswith("budget: the evaluation at optimizer step 1 (not run) after the round in "
                                       "flight (up to"), s["stop_reason"]


@pytest.mark.slow
def test_a_run_that_reaches_max_steps_stops_for_its_steps_where_a_further_round_would_not_fit(tiny, tmp_path):
    """A held-out user: ``flopplan train --engine trl --steps 4 --budget 3e9`` ran its 4 rounds of 4 and was
    reported stopped by its budget ("round 5 could cost up to 607,301,632 FLOPs, 570,793,472 left"; stop.reason
    "budget"), where the built-in engine says "reached 4 steps": at the last round's end the guard priced a round
    past max_steps, which no run would start. The steps stop it, here and when the run is resumed from its final
    checkpoint (killed before its summary); where the budget stops the run before max_steps, the budget does."""
    from flopplan.trl import meter

    make = _trainers(tiny, tmp_path)
    free = make(args=_grpo_args(tmp_path / "free"))
    bounds, executed = _bounds_and_rounds(meter(free, out=tmp_path / "free-run"))
    free.train()
    assert len(executed) == 2 and _summary(tmp_path / "free-run")["stop"]["reason"] == "steps"
    budget = sum(executed) + bounds[2] - 1  # two rounds fit, a third would not
    assert executed[0] + bounds[1] <= budget

    def run(where: str, max_steps: int, resume: bool = False) -> dict:
        trainer = make(args=_grpo_args(tmp_path / where, max_steps=max_steps))
        meter(trainer, budget=budget, out=tmp_path / where / "run", resume=resume)
        trainer.train(resume_from_checkpoint=str(tmp_path / where / "trl" / f"checkpoint-{max_steps}")
                      if resume else None)
        return _summary(tmp_path / where / "run")

    s = run("steps", 2)
    assert s["steps"] == 2 and s["flops"]["total"] == sum(executed)
    assert s["stop"]["reason"] == "steps" and s["stop_reason"] == "reached 2 optimizer steps (2 rounds)"
    (tmp_path / "steps" / "run" / "summary.json").unlink()  # killed after its final checkpoint, before its summary
    killed = cli("report", str(tmp_path / "steps" / "run"))  # (it said "is not a flopplan run folder")
    assert killed.returncode == 2 and killed.stderr.count("\n") == 1, killed.stderr
    assert f"holds a run still going or killed (no summary.json yet): its ledger holds 2 committed steps, " \
        f"{sum(executed):,} FLOPs; resume it" in killed.stderr
    again = run("steps", 2, resume=True)
    assert again["steps"] == 2 and again["flops"]["total"] == sum(executed) and again["stop"]["reason"] == "steps"
    over = run("budget", 3)  # the budget stops it before its third round, max_steps 3
    assert over["steps"] == 2 and over["stop"]["reason"] == "budget" and over["stop"]["round"] == 3
    assert over["stop_reason"].startswith("budget: round 3 could cost up to")


@pytest.mark.slow
def test_resume_from_checkpoint_true_takes_the_last_complete_checkpoint_and_a_finished_run_trains_no_further(
        tiny, tmp_path):
    """A held-out user's kills: the resume the guide documents, ``trainer.train(resume_from_checkpoint=True)``,
    raised transformers' ValueError ("No valid checkpoint found") after a kill before the first checkpoint, and
    FileNotFoundError (``checkpoint-N/trainer_state.json``) after a kill during a save: transformers reads True as
    the highest-numbered folder, complete or not. The meter reads it as the last complete checkpoint, or a start
    from step 0 where there is none (its work charged as lost). And the same resume of a run that had reached
    max_steps trained a step past them at each call (3, then 4, then 5 steps, its summary rewritten each time):
    it trains nothing now, its summary as it was. A resume with another GRPOConfig (group size, completion length)
    went on with the new shapes under the old configuration; it is refused. The rerun's summary kept TRL's token
    check (it logs no step) and the earlier sessions' notes (held only the last session's)."""
    from flopplan.trl import meter

    make = _trainers(tiny, tmp_path)
    run = tmp_path / "run"

    def train(resume: bool) -> tuple[object, dict]:
        trainer = make(args=_grpo_args(tmp_path, save_steps=1))
        metered = meter(trainer, out=run, resume=resume)
        trainer.train(resume_from_checkpoint=True if resume else None)
        return trainer, {**_summary(run), "notes": metered.notes}

    _, done = train(False)
    second, steps = _executed(run / "ledger.jsonl", 1)  # what the second round executed
    assert done["steps"] == 2 and steps == {2} and second > 0 and (tmp_path / "trl" / "checkpoint-2").is_dir()
    trainer, again = train(True)  # finished: resumed at max_steps
    assert trainer.state.global_step == 2 and again["steps"] == 2 and again["flops"] == done["flops"]
    assert again["stop"]["reason"] == "steps" and again["lost_flops"] == 0
    assert again["engine_checks"] == done["engine_checks"] and done["engine_checks"]["num_tokens"]["equal"]
    (tmp_path / "trl" / "checkpoint-2" / "trainer_state.json").unlink()  # killed while saving checkpoint-2
    (run / "summary.json").unlink()
    trainer, resumed = train(True)
    assert trainer.state.global_step == 2 and resumed["steps"] == 2 and resumed["lost_flops"] == second
    for checkpoint in (tmp_path / "trl").glob("checkpoint-*"):  # killed before any checkpoint was complete
        (checkpoint / "trainer_state.json").unlink()
    (run / "summary.json").unlink()
    trainer, fresh = train(True)
    assert trainer.state.global_step == 2 and fresh["steps"] == 2 and fresh["lost_flops"] > 0
    assert fresh["notes"][0] == "no checkpoint yet: the run starts again", fresh["notes"]
    finished, _ = train(True)  # rerun once finished: the earlier sessions' notes stay in its summary
    assert _summary(run)["notes"][0] == "no checkpoint yet: the run starts again", _summary(run)
    before = _summary(run)
    other = make(args=_grpo_args(tmp_path, save_steps=1, num_generations=2, max_completion_length=16))
    with pytest.raises(UserError, match=r"another recipe than this trainer's \(completion_len 8 -> 16, .*group_size "
                                        r"4 -> 2"):  # resumed with other settings: refused, nothing written
        meter(other, out=run, resume=True)
    assert _summary(run) == before
    # train() again on the same metered trainer returned None and trained nothing, silently (a held-out user)
    with pytest.raises(UserError, match=r"^trainer.train\(\) trained nothing: the run is over \(reached 2 optimizer "
                                        r"steps \(2 rounds\)\): raise trainer.args.max_steps"):
        finished.train(resume_from_checkpoint=True)
    with pytest.raises(UserError, match=r"^trainer.train\(\) again from step 0, but this metered run holds 2 rounds"):
        finished.train()
    finished.args.max_steps = 3  # further: metered on as the same run
    finished.train(resume_from_checkpoint=True)
    further = _summary(run)
    assert finished.state.global_step == 3 and further["steps"] == 3 and further["stop"]["reason"] == "steps"
    assert further["lost_flops"] == fresh["lost_flops"] and further["flops"]["total"] > fresh["flops"]["total"]
    notes = finished.flopplan_meter.notes  # each once, after resumes and train() again (a held-out user: 3 copies)
    assert notes and len(notes) == len(set(notes)), notes


@pytest.mark.slow
def test_measuring_counts_what_a_subclass_runs_outside_the_charged_units(tiny, tmp_path):
    """A GRPOTrainer subclass that runs work of its own in ``compute_loss`` (a diagnostic forward, here a 64 x 64
    matmul: 2 x 64^3 FLOPs a call) was neither charged nor seen by ``measure=True``, which counted only the calls
    the meter wraps (a held-out user's script: 122,726,400 FLOPs, 18 % of the run). Measuring now counts TRL's
    whole training and prediction steps too, and reports what ran outside the units."""
    import torch
    from datasets import load_dataset
    from trl import GRPOTrainer

    from flopplan.trl import meter

    calls = []

    class Diagnosing(GRPOTrainer):
        def compute_loss(self, *args, **kwargs):
            with torch.no_grad():
                torch.ones(64, 64) @ torch.ones(64, 64)
            calls.append(1)
            return super().compute_loss(*args, **kwargs)

    example = _example()
    example.write_dataset(tmp_path / "data.parquet", 16, chat=True)
    data = load_dataset("parquet", data_files=str(tmp_path / "data.parquet"), split="train")
    trainer = Diagnosing(model=str(tiny / "policy"), reward_funcs=[example.accuracy_reward], args=_grpo_args(tmp_path),
                         train_dataset=data)
    metered = meter(trainer, out=tmp_path / "run", measure=True)
    trainer.train()
    s = _summary(tmp_path / "run")
    assert s["measured_equals_closed_form"] is True  # the units themselves are exact
    assert len(calls) == 2 and s["engine_checks"]["outside_units"] == {"flops": 2 * 64**3 * 2, "none": False}
    assert any(note.startswith(f"{2 * 64**3 * 2:,} FLOPs ran in TRL's steps outside") for note in metered.notes)
    outside = next(note for note in metered.notes if "outside" in note)  # in the run folder and its report too
    assert outside in s["notes"] and f"note: {outside}" in cli("report", str(tmp_path / "run"), check=True).stdout
    resumed = Diagnosing(model=str(tiny / "policy"), reward_funcs=[example.accuracy_reward],
                         args=_grpo_args(tmp_path, max_steps=4), train_dataset=data)
    meter(resumed, out=tmp_path / "run", measure=True, resume=True)  # the figure is the run's, resumes included
    resumed.train(resume_from_checkpoint=str(tmp_path / "trl" / "checkpoint-2"))
    assert len(calls) == 4 and _summary(tmp_path / "run")["engine_checks"]["outside_units"]["flops"] == 4 * 2 * 64**3


@pytest.mark.slow
def test_a_subclass_forward_with_its_backward_in_the_update_is_named_with_all_it_ran_beyond_the_ledger(tiny, tmp_path):
    """A compute_loss that runs another forward of the policy: the forward runs outside the units and its backward
    inside the update's. The note gave only the first (a held-out user's run: 5,861,888 of 17,585,664 FLOPs beyond
    the ledger); the update's difference and the total are named now."""
    from datasets import load_dataset
    from trl import GRPOTrainer

    from flopplan.trl import meter

    class Auxiliary(GRPOTrainer):
        def compute_loss(self, model, inputs, *args, **kwargs):
            loss = super().compute_loss(model, inputs, *args, **kwargs)
            ids = inputs["completion_ids"]
            return loss + 0.0 * model(input_ids=ids).logits.mean()

    example = _example()
    example.write_dataset(tmp_path / "data.parquet", 16, chat=True)
    data = load_dataset("parquet", data_files=str(tmp_path / "data.parquet"), split="train")
    trainer = Auxiliary(model=str(tiny / "policy"), reward_funcs=[example.accuracy_reward],
                        args=_grpo_args(tmp_path, save_strategy="no"), train_dataset=data)
    metered = meter(trainer, out=tmp_path / "run", measure=True)
    trainer.train()
    s = _summary(tmp_path / "run")
    update = s["measured_by_unit"]["update"]
    extra, outside = update["measured"] - update["closed_form"], s["engine_checks"]["outside_units"]["flops"]
    assert extra > 0 and outside > 0 and s["measured_equals_closed_form"] is False
    assert f"measured - charged FLOPs by unit: update {extra:+,}; {extra + outside:,} FLOPs ran beyond the ledger " \
           "in all" in metered.notes


@pytest.mark.slow
def test_a_callback_that_ends_training_early_is_a_stop_of_its_own_not_a_step_limit(tiny, tmp_path):
    """An early-stopping callback was recorded as a stop for steps, and a race read its pilot as done with its rung
    at 3 of 17 steps (a held-out team's race completed on short pilots). It is a stop of its own now, which a race
    refuses as short of the budget; trained further, the run goes on."""
    from transformers import TrainerCallback

    from flopplan.race.pilots import ended
    from flopplan.runfile import load_summary
    from flopplan.trl import meter

    class StopAtOne(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            control.should_training_stop = state.global_step >= 1

    trainer = _trainers(tiny, tmp_path)(args=_grpo_args(tmp_path, max_steps=100, save_strategy="no"),
                                        callbacks=[StopAtOne()])
    metered = meter(trainer, out=tmp_path / "run")
    trainer.train()
    summary = load_summary(tmp_path / "run")
    assert metered.decision.reason == summary.stopped_for == "stopped" and summary.steps == 1
    assert summary.stop_reason == "stopped by the trainer at optimizer step 1 of 100 (a callback) (1 round)"
    assert not ended(summary)


def test_a_compiled_reward_model_or_a_subclass_keeping_transformers_forward_is_priced_as_its_class(tiny):
    """A review: TRL takes compiled reward models, and the class check read torch.compile's wrapper (refused what the
    previous code metered exactly), as it did a subclass with no forward of its own."""
    torch = pytest.importorskip("torch")
    from transformers import AutoModelForSequenceClassification, Qwen2ForSequenceClassification

    from flopplan.engines.trl_trainer import reward_model_class

    class Mine(Qwen2ForSequenceClassification):
        pass

    plain = AutoModelForSequenceClassification.from_pretrained(str(tiny / "orm"))
    assert reward_model_class(torch.compile(plain, backend="eager")) == "Qwen2ForSequenceClassification"
    assert reward_model_class(Mine.from_pretrained(str(tiny / "orm"))) == "Qwen2ForSequenceClassification"

    class Own(Qwen2ForSequenceClassification):
        def forward(self, *args, **kwargs):
            return super().forward(*args, **kwargs)

    with pytest.raises(UserError, match=r"^reward model Own: flopplan prices transformers'"):
        reward_model_class(Own.from_pretrained(str(tiny / "orm")))


@pytest.mark.slow
def test_a_reward_model_from_a_causal_lm_and_a_callbacks_evaluation_are_metered_exactly(tiny, tmp_path):
    """Two held-out scripts' findings. A causal LM's checkpoint loaded for classification with two labels keeps
    architectures ["...ForCausalLM"] in its config: its head was priced with one label (31,488 FLOPs short in the
    user's run); the class that runs names it now. A callback that evaluates at a round's last step logged before
    the meter's callback committed the round: 'TRL logged 45 tokens, the meter saw 0' at every step, while TRL's
    count and the meter's agreed."""
    from transformers import AutoModelForSequenceClassification, TrainerCallback

    from flopplan.trl import meter

    make = _trainers(tiny, tmp_path)
    data = make().train_dataset
    reward = AutoModelForSequenceClassification.from_pretrained(str(tiny / "policy"), num_labels=2)
    trainer = make(reward_funcs=[reward], eval_dataset=data.select(range(4)),
                   args=_grpo_args(tmp_path, save_strategy="no", per_device_eval_batch_size=4))

    class Evaluate(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            trainer.evaluate()

    trainer.add_callback(Evaluate())
    metered = meter(trainer, out=tmp_path / "run", measure=True)
    trainer.train()
    s = _summary(tmp_path / "run")
    _exact(s)
    assert s["flops"]["evaluation"] > 0 and s["phases"]["reward"]["executed"] > 0
    assert not [n for n in metered.notes if n.startswith("TRL logged")]


def _one_token():
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"x": 0}, unk_token="x")))


def _wider():
    from flopplan.grpo.codecs import hf_char_tokenizer

    tokenizer = hf_char_tokenizer()
    tokenizer.add_tokens([f"<t{i}>" for i in range(40)])
    return tokenizer


def _mean_pooled(path: str):
    """A team's own reward model: a transformers backbone, mean-pooled, and a head of its own."""
    import torch
    from transformers import AutoModel

    class MeanPooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = AutoModel.from_pretrained(path)
            self.config = self.backbone.config
            self.head = torch.nn.Linear(self.config.hidden_size, 1)

        def forward(self, input_ids, attention_mask):
            h = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            return type("Out", (), {"logits": self.head(h.mean(1))})()

    return MeanPooled()


def _two_layer_head(path: str):
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(path)
    hidden = model.config.hidden_size
    model.score = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.Linear(hidden, 1, bias=False))
    return model


@pytest.mark.slow
def test_what_cannot_be_priced_is_refused_at_attach_time(tiny, tmp_path):
    from datasets import load_dataset
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    from flopplan.engines.trl_hook import meter as attach
    from flopplan.recipe import Recipe
    from flopplan.trl import meter

    trainer = _trainers(tiny, tmp_path)
    orm = str(tiny / "orm")
    out = tmp_path / "run"
    for fragment, made in (
        ("layers_to_transform", lambda: trainer(peft_config=LoraConfig(r=4, target_modules=["q_proj"],
                                                                        layers_to_transform=[0]))),
        ("use_dora", lambda: trainer(peft_config=LoraConfig(r=4, target_modules=["q_proj"], use_dora=True))),
        ("reward models", lambda: trainer(reward_funcs=[AutoModelForSequenceClassification.from_pretrained(orm),
                                                        AutoModelForSequenceClassification.from_pretrained(orm)])),
        # a reward tokenizer that cannot feed its model failed mid-round (a folder without tokenizer files loads as
        # an empty one; another model's holds ids past the embeddings)
        ("tokenizer holds 1 token", lambda: trainer(reward_funcs=[
            AutoModelForSequenceClassification.from_pretrained(orm)], reward_processing_classes=[_one_token()])),
        ("holds 63 tokens but its model has 32", lambda: trainer(reward_funcs=[
            AutoModelForSequenceClassification.from_pretrained(orm)], reward_processing_classes=[_wider()])),
        # a reward model TRL runs but its config does not describe (a held-out user's ensemble of two backbones ran
        # 47 % beyond the budget with the ledger at the budget; a replaced score head; adapters)
        ("reward model MeanPooled: flopplan prices transformers'", lambda: trainer(reward_funcs=[_mean_pooled(orm)])),
        ("its score head is not the bias-free", lambda: trainer(reward_funcs=[_two_layer_head(orm)])),
        ("carries adapters, which flopplan does not price", lambda: trainer(reward_funcs=[get_peft_model(
            AutoModelForSequenceClassification.from_pretrained(orm), LoraConfig(r=4, target_modules=["q_proj"]))])),
        # a PeftModel the script wrapped, with beta > 0: TRL adds the 'ref' adapter the reference forward runs with
        # (it was refused as "the policy carries 2 adapters", which the script had not made)
        ("TRL added a 'ref' copy of the adapter", lambda: trainer(model=get_peft_model(
            AutoModelForCausalLM.from_pretrained(str(tiny / "policy")), LoraConfig(r=4, target_modules=["q_proj"])),
            args=_grpo_args(tmp_path, beta=0.04))),
        # each process's share of one batch (helper 139: metered as a batch per process, world_size x over)
        ("accelerator_config split_batches", lambda: trainer(args=_grpo_args(
            tmp_path, accelerator_config={"split_batches": True}))),
    ):
        with pytest.raises(UserError, match=fragment) as caught:
            meter(made(), out=out)
        assert "\n" not in str(caught.value) and not out.exists()
    # a regex target_modules (peft documents it) is priced as what peft adapted (it was refused)
    regex, listed = (meter(trainer(peft_config=LoraConfig(r=4, target_modules=targets))).recipe
                     for targets in (r".*\.(q_proj|v_proj)", ["q_proj", "v_proj"]))
    assert regex.with_(policy=listed.policy) == listed and regex.lora_targets == ("q_proj", "v_proj")
    from trl import GRPOConfig

    every_other = GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=8, num_generations=4,
                             max_completion_length=8, use_cpu=True, report_to="none", max_steps=2,
                             activation_checkpointing=True, activation_checkpointing_kwargs={"every_n_layers": 2})
    with pytest.raises(UserError, match="every_n_layers 2: flopplan prices the default recompute") as caught:
        meter(trainer(args=every_other), out=out)  # transformers 5.25's name, half the layers recomputed
    assert "\n" not in str(caught.value) and not out.exists()
    beams = AutoModelForCausalLM.from_pretrained(str(tiny / "policy"))
    beams.generation_config.num_beams = 3  # TRL's generate inherits it: 3 beams a row, charged as one (a review)
    with pytest.raises(UserError, match="the policy's generation_config sets num_beams 3") as caught:
        meter(trainer(model=beams), out=out)
    assert "\n" not in str(caught.value) and not out.exists()
    chunked = AutoModelForCausalLM.from_pretrained(str(tiny / "policy"))
    chunked.generation_config.prefill_chunk_size = 1  # a prefill token by token: 8,200,192 FLOPs uncharged (a
    with pytest.raises(UserError, match="the policy's generation_config sets prefill_chunk_size 1"):  # held-out
        meter(trainer(model=chunked), out=out)  # user's script; the same key in generation_kwargs was refused)
    assert not out.exists()
    late = trainer()  # set on TRL's own generation config after meter(): checked again when train() starts
    meter(late, out=tmp_path / "late")
    late.generation_config.prefill_chunk_size = 1
    with pytest.raises(UserError, match=r"^trainer\.generation_config sets prefill_chunk_size 1") as caught:
        late.train()
    assert "\n" not in str(caught.value)
    for key, value, fragment in (("max_new_tokens", 4096, "not the 8 TRL set from max_completion_length"),
                                 ("cache_implementation", "static", "cache_implementation 'static'")):
        changed = trainer()  # (TRL's own settings, changed after the trainer was built: the guard's bound, the cache)
        meter(changed, out=tmp_path / key)
        setattr(changed.generation_config, key, value)
        with pytest.raises(UserError, match=fragment):
            changed.train()
    _example().write_dataset(tmp_path / "plain.parquet", 16, chat=False)  # a reward model reads plain prompts with
    plain_data = load_dataset("parquet", data_files=str(tmp_path / "plain.parquet"), split="train")  # its tokenizer
    reader = AutoTokenizer.from_pretrained(orm)
    seen = []

    def check_prompts(*lengths):
        seen.append(lengths)
        raise UserError("seen")

    with pytest.raises(UserError, match="seen"):
        attach(trainer(reward_funcs=[AutoModelForSequenceClassification.from_pretrained(orm)],
                      train_dataset=plain_data), out=out, check_prompts=check_prompts)  # (the hook race pilots use)
    longest = max(len(reader(text=p, add_special_tokens=False)["input_ids"]) for p in plain_data["prompt"])
    assert seen[0][2] == longest > 0 and seen[0][3] == 0 and not out.exists()  # (no evaluation data)
    reader.add_tokens(["<think>"])  # a reward tokenizer that is not the policy's: the meter says what it learns
    noted = meter(trainer(reward_funcs=[AutoModelForSequenceClassification.from_pretrained(orm)],
                          reward_processing_classes=[reader]))
    assert any(note.startswith("the reward model's tokenizer is not the policy's") for note in noted.notes)
    with pytest.raises(UserError, match=r"nothing to resume in .*never': no config\.json"):
        meter(trainer(), out=tmp_path / "never", resume=True)  # a folder no run ever wrote
    assert not (tmp_path / "never").exists()
    # resume continues a run folder's ledger and charges what a kill lost after its checkpoint: without one, it was
    # accepted and charged nothing (a held-out user); a checkpoint's ledger is continued without it
    with pytest.raises(UserError, match=r"^resume=True continues the run folder out=") as caught:
        meter(trainer(), resume=True)
    assert "\n" not in str(caught.value)
    with pytest.raises(UserError, match=r"^meter\(\) takes a trl\.GRPOTrainer \(or a subclass\): got object$"):
        meter(object())  # (a raw AttributeError on its state)
    from flopplan.projections import LORA_TARGETS

    # peft writes "all-linear" out as every linear layer's full name: priced as every projection (it was refused);
    # full names that leave a layer out are refused
    every = meter(trainer(peft_config=LoraConfig(r=4, target_modules="all-linear")))
    assert every.recipe.lora_rank == 4 and set(every.recipe.lora_targets) == set(LORA_TARGETS)
    with pytest.raises(UserError, match=r"^peft target_modules: q_proj on 1 of the 2 layers") as caught:
        meter(trainer(peft_config=LoraConfig(r=4, target_modules=["model.layers.0.self_attn.q_proj"])), out=out)
    assert "\n" not in str(caught.value) and not out.exists()
    plain = trainer(peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    with pytest.raises(UserError, match="lora_rank"):
        meter(plain, out=out, recipe=Recipe(policy="tiny", lora_rank=8, prompts_per_step=2, group_size=4))
    assert not out.exists()
    stream = load_dataset("parquet", data_files=str(tmp_path / "data.parquet"), split="train").to_iterable_dataset()
    streamed = trainer(train_dataset=stream, args=GRPOConfig(
        output_dir=str(tmp_path / "trl"), per_device_train_batch_size=8, num_generations=4, max_completion_length=8,
        use_cpu=True, report_to="none", max_steps=2))  # (TRL takes a stream with max_steps)
    with pytest.raises(UserError, match=r"^the trainer's train_dataset is an IterableDataset \(streamed\)") as caught:
        meter(streamed, out=out)
    assert "\n" not in str(caught.value) and not out.exists()
    searched = trainer()  # transformers' hyperparameter_search trains the one trainer once per trial
    meter(searched)
    with pytest.raises(UserError, match=r"^trainer.hyperparameter_search trains one run per trial") as caught:
        searched.train(trial={"learning_rate": 1e-4})  # (what its optuna and ray backends call)
    assert "\n" not in str(caught.value) and searched.state.global_step == 0


@pytest.mark.slow
def test_the_meter_leaves_no_temporary_folder_behind(tiny, tmp_path, monkeypatch):
    """Without a run folder the models' configs (which the recipe names) live in a temporary folder as long as the
    meter; with one, in the run folder alone."""
    import gc
    import tempfile

    from flopplan.trl import meter

    make = _trainers(tiny, tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    def metered(**where):
        trainer = make()
        return trainer, meter(trainer, budget=10**12, **where)

    trainer, m = metered()
    held = list(scratch.iterdir())
    assert len(held) == 1 and m.recipe.policy == str(held[0] / "policy" / "config.json")
    assert (held[0] / "policy" / "config.json").is_file()
    del trainer, m
    gc.collect()
    assert not any(scratch.iterdir())
    _, m = metered(out=tmp_path / "run")
    assert not any(scratch.iterdir()) and m.recipe.policy.startswith(str(tmp_path / "run"))


# -- vLLM: the charging on recorded outputs ------------------------------------------------------------------------

def _vllm_meter(mode: str, rank: int = 0, world: int = 1):
    pytest.importorskip("torch")
    from flopplan.engines.trl import TRLRun
    from flopplan.engines.trl_meter import TRLMeter
    from flopplan.lengths import Length
    from flopplan.recipe import Recipe

    recipe = Recipe(policy="tiny", lora_rank=4, prompts_per_step=4, group_size=4, micro_batch=8, engine="vllm",
                    prefix_sharing=mode == "server", prompt_len=Length.fixed(7), completion_len=Length.fixed(5),
                    logprob_head="fused-compact", generation_batch=None)
    run = TRLRun(8, 1, 2 // world, 1, 4, world, True, mode, True)
    return recipe, TRLMeter(recipe, run, None, rank=rank)


def test_a_budget_stop_says_its_bound_holds_the_evaluations_kept_in_reserve():
    """A held-out user read "round 3 could cost up to 2,202,121,728 FLOPs, 1,125,552,896 left" as a round's cost:
    the bound was one round and the two evaluations the guard keeps in reserve. The message says so."""
    recipe, metered = _vllm_meter("colocate")
    from flopplan.engines.trl_meter import TRLMeter

    metered = TRLMeter(recipe, metered.run, 10, eval_rows=8)
    round_bound, evaluation = metered.next_round_bound(), metered.evaluation_bound()
    assert round_bound > 0 and evaluation > 0 and not metered.fits_next_round(2)
    assert metered.decision.message == (f"budget: round 1 (up to {round_bound:,} FLOPs) with 2 evaluations kept in "
                                        f"reserve (up to {evaluation:,} each) could cost up to "
                                        f"{round_bound + 2 * evaluation:,} FLOPs, 10 left")
    alone = TRLMeter(recipe, metered.run, 10)  # no evaluation: the round alone, as before
    assert not alone.fits_next_round(2) and alone.decision.message.startswith("budget: round 1 could cost up to")


@pytest.mark.parametrize("mode", ["colocate", "server"])
def test_vllm_rollouts_are_charged_as_vllm_runs_them(mode):
    """What TRL's vLLM path returns (``_generate_single_turn``: unpadded prompt and completion id lists, a prompt
    repeated num_generations times in a row): at fixed lengths the charge equals the plan's rollout phases (no
    padding; in server mode one prefill per prompt); at mixed lengths each row costs its own lengths."""
    from flopplan.cost import step_cost

    recipe, meter = _vllm_meter(mode)
    prompts = [[1] * 7 for _ in range(16)]
    meter.record_generation(prompts, [[2] * 5 for _ in range(16)], group=4)
    rollout = meter.local_charges()["rollout"]
    planned = step_cost(recipe).step_phases
    assert rollout.executed == {p: planned[p] for p in ("rollout.prefill", "rollout.decode")}
    assert rollout.executed == rollout.useful  # nothing padded

    _, mixed = _vllm_meter(mode)
    short = [[2] * (1 + i % 5) for i in range(16)]
    mixed.record_generation(prompts, short, group=4)
    decode = mixed.local_charges()["rollout"].executed["rollout.decode"]
    assert decode < rollout.executed["rollout.decode"]  # short completions cost less: no padding to the longest


def test_vllm_server_prefills_each_group_once_across_processes():
    """In server mode TRL sends each prompt once (``n = num_generations``); a group may straddle two processes'
    shards: the prefill is charged to the process holding the group's first row, once over the run."""
    prompts = [[1] * (3 + i // 4) for i in range(12)]  # 3 groups of 4, each its own prompt length
    completions = [[2] * 4 for _ in range(12)]
    _, one = _vllm_meter("server")
    one.record_generation(prompts, completions, group=4)
    whole = one.local_charges()["rollout"].executed["rollout.prefill"]
    parts = 0
    for rank in (0, 1):  # 6 rows a process: the second group straddles them
        _, shard = _vllm_meter("server", rank=rank, world=2)
        shard.record_generation(prompts[rank * 6:(rank + 1) * 6], completions[rank * 6:(rank + 1) * 6], group=4)
        parts += shard.local_charges()["rollout"].executed["rollout.prefill"]
    assert parts == whole > 0


def test_what_a_reward_model_read_beyond_its_rows_is_the_largest_any_process_saw():
    """Each process learns from its own rows how far its reward model reads beyond prompt + completion (another
    tokenizer splits them worse); it was kept per process, so the processes' guards priced the next round apart,
    and a resume took rank 0's (its checkpoint) whatever another process had seen. The commit's sum over the
    processes carries each one's in a slot of its own, and every process takes the largest."""
    meters = [_vllm_meter("colocate", rank=rank, world=2)[1] for rank in (0, 1)]
    meters[0].reward_extra, meters[1].reward_extra = 3, 9
    for m in meters:  # each process alone: its own
        m._reduce(m.round, {}, lambda t: t)
    assert [m.reward_extra for m in meters] == [3, 9]
    vectors = []
    for m in meters:
        m._reduce(m.round, {}, lambda t: vectors.append(t) or t)
    total = vectors[0] + vectors[1]  # what accelerate's sum over the two processes returns to each
    for m in meters:
        m._reduce(m.round, {}, lambda t: total)
    assert [m.reward_extra for m in meters] == [9, 9]


@pytest.mark.slow
def test_the_budget_stops_checkpoint_is_saved_under_save_strategy_best_whatever_the_metric(tiny, tmp_path):
    """save_strategy="best" makes TRL save after an evaluation only at a new best metric; the round the budget
    stops after is checkpointed all the same (a resume continues from it). eval_loss is 0.0 at every GRPO
    evaluation, so with greater_is_better no evaluation after the first is a new best."""
    from datasets import load_dataset
    from trl import GRPOConfig, GRPOTrainer

    from flopplan.trl import meter

    example = _example()
    example.write_dataset(tmp_path / "data.parquet", 24, chat=True)
    data = load_dataset("parquet", data_files=str(tmp_path / "data.parquet"), split="train")
    args = GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=8, use_cpu=True, report_to="none", max_steps=40, eval_strategy="steps",
                      eval_steps=1, per_device_eval_batch_size=8, save_strategy="best",
                      metric_for_best_model="eval_loss", greater_is_better=True)

    def trainer():
        return GRPOTrainer(model=str(tiny / "policy"), reward_funcs=[example.accuracy_reward], args=args,
                           train_dataset=data, eval_dataset=data.select(range(8)))

    probe = meter(trainer())  # what a round and an evaluation may cost, before any runs
    round_bound, eval_bound = probe.next_round_bound(), probe.evaluation_bound()
    run = trainer()
    metered = meter(run, budget=3 * round_bound + 6 * eval_bound, out=tmp_path / "run")
    run.train()
    s = _summary(tmp_path / "run")
    steps = run.state.global_step
    assert s["stop"]["reason"] == "budget" and 2 <= steps < 40 and metered.decision.stop
    assert (tmp_path / "trl" / f"checkpoint-{steps}" / "flopplan_ledger.json").is_file()


@pytest.mark.slow
def test_a_dict_of_evaluation_datasets_is_metered_each_in_its_loop(tiny, tmp_path):
    """transformers evaluates a dict of evaluation datasets one after the other at each evaluation (metrics under
    each name); the meter read ``eval_dataset["prompt"]`` and failed with a traceback. Each dataset is now read, an
    evaluation's worst case is the sum of each dataset's (its rows rounded up to the dataloader's batches), and
    every unit equals FlopCounterMode's count."""
    from datasets import load_dataset
    from trl import GRPOConfig, GRPOTrainer

    from flopplan.trl import meter

    example = _example()
    example.write_dataset(tmp_path / "data.parquet", 24, chat=True)
    data = load_dataset("parquet", data_files=str(tmp_path / "data.parquet"), split="train")
    args = GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=8, use_cpu=True, report_to="none", max_steps=2, eval_strategy="steps",
                      eval_steps=1, per_device_eval_batch_size=8)

    def trainer(evaluation):
        return GRPOTrainer(model=str(tiny / "policy"), reward_funcs=[example.accuracy_reward], args=args,
                           train_dataset=data, eval_dataset=evaluation)

    parts = {"short": data.select(range(8)), "odd": data.select(range(8, 13))}
    bounds = [meter(trainer(part)).evaluation_bound() for part in parts.values()]
    run = trainer(parts)
    metered = meter(run, out=tmp_path / "run", measure=True)
    run.train()
    s = _summary(tmp_path / "run")
    _exact(s)
    assert metered.eval_rows == 8 * 4 + 24 and metered.evaluation_bound() == sum(bounds)  # 5 x 4 rows: 3 batches
    assert s["steps"] == 2 and metered.evaluations == 2 * 2  # both datasets at both boundaries
    for line in map(json.loads, (tmp_path / "run" / "ledger.jsonl").read_text().splitlines()):
        spent = sum(v for c in line["charges"] if c["unit"] == "eval" for v in c["executed"].values())
        assert 0 < spent <= sum(bounds)


@pytest.mark.slow
def test_a_resumed_script_does_not_evaluate_again_at_the_step_it_resumed(tiny, tmp_path):
    """transformers runs ``eval_on_start`` at every ``train`` call: a user's script resumed from a checkpoint
    evaluated again at that step, into a second log line for a step the logs held, which a kill before the next
    checkpoint left neither kept nor charged (a review). The meter turns it off on resume, as ``flopplan train
    --engine trl`` does, and says so; the resumed run logs each step once and its evaluations once."""
    from datasets import load_dataset
    from trl import GRPOConfig, GRPOTrainer

    from flopplan.trl import meter

    example = _example()
    example.write_dataset(tmp_path / "data.parquet", 24, chat=True)
    data = load_dataset("parquet", data_files=str(tmp_path / "data.parquet"), split="train")

    def trainer(steps):
        args = GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=8, num_generations=4,
                          max_completion_length=8, use_cpu=True, report_to="none", max_steps=steps,
                          eval_strategy="steps", eval_steps=1, eval_on_start=True, save_steps=1,
                          per_device_eval_batch_size=8)
        return GRPOTrainer(model=str(tiny / "policy"), reward_funcs=[example.accuracy_reward], args=args,
                           train_dataset=data, eval_dataset=data.select(range(8)))

    first = trainer(1)
    meter(first, out=tmp_path / "run")
    first.train()
    again = trainer(2)
    resumed = meter(again, out=tmp_path / "run", resume=True)
    again.train(resume_from_checkpoint=True)
    assert "eval_on_start skipped: the run resumed at optimizer step 1, a step its logs hold" in resumed.notes
    assert not again.args.eval_on_start and resumed.evaluations == 1 + 2  # the baseline and one a round
    steps = [json.loads(x)["step"] for x in (tmp_path / "run" / "ledger.jsonl").read_text().splitlines()]
    assert steps == [0, 1, 2] and _summary(tmp_path / "run")["lost_flops"] == 0


@pytest.mark.slow
def test_an_evaluation_at_an_epochs_end_after_the_stops_checkpoint_is_lost_work_at_a_kill(tiny, tmp_path):
    """eval_strategy="epoch" and a stop mid-epoch (here max_steps): the stop's checkpoint is saved at its step,
    then transformers evaluates at the epoch's end, into a second log line for that step that no checkpoint holds
    (a review). Killed then, the resumed run charged none of it (the step is the checkpoint's). Lines carry the
    commit count now: the resume charges that evaluation as lost, exactly what the kill left on disk."""
    from datasets import load_dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from flopplan.trl import meter

    example = _example()
    example.write_dataset(tmp_path / "data.parquet", 24, chat=True)
    data = load_dataset("parquet", data_files=str(tmp_path / "data.parquet"), split="train")

    class Killed(Exception):
        pass

    class KillAfterEvaluating(TrainerCallback):
        def on_evaluate(self, args, state, control, **kwargs):
            raise Killed  # the evaluation committed (its log line ran), nothing after it

    def trainer(steps, *callbacks):
        args = GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=8, num_generations=4,
                          max_completion_length=8, use_cpu=True, report_to="none", max_steps=steps,
                          eval_strategy="epoch", save_strategy="steps", save_steps=1, per_device_eval_batch_size=8)
        return GRPOTrainer(model=str(tiny / "policy"), reward_funcs=[example.accuracy_reward], args=args,
                           train_dataset=data, eval_dataset=data.select(range(8)), callbacks=list(callbacks))

    first = trainer(2, KillAfterEvaluating())
    metered = meter(first, out=tmp_path / "run")
    with pytest.raises(Killed):
        first.train()
    metered.folder.unlock()  # (the process would have died with its lock)
    run = tmp_path / "run"
    progress = [json.loads(x) for x in (run / "progress.jsonl").read_text().splitlines()]
    evaluation = sum(v for line in progress for c in line["charges"] if c["unit"] == "eval"
                     for v in c["executed"].values())
    assert evaluation > 0 and [json.loads(x)["step"] for x in (run / "ledger.jsonl").read_text().splitlines()] == [1, 2]
    again = trainer(3)
    meter(again, out=run, resume=True)
    again.train(resume_from_checkpoint=True)
    s = _summary(run)
    assert s["lost_flops"] == evaluation and s["steps"] == 3 and s["lost_charged"]


def test_a_recipe_matches_a_trainers_when_their_models_compute_the_same_passes(tmp_path):
    """The round check compares the models as far as they set FLOPs: Qwen2.5-Math-1.5B's context (4,096 tokens) and
    RoPE base (10,000) beside Qwen2.5-1.5B's architecture are the same round; another vocabulary (a resized
    embedding) is not, nor is another attention kernel; ``skip`` leaves a field out."""
    from flopplan.engines.trl_trainer import first_difference
    from flopplan.hf_config import to_hf_config
    from flopplan.recipe import Recipe

    base = Recipe(policy="qwen2.5-1.5b")

    def saved(name: str, **changes: object) -> Recipe:
        path = tmp_path / name / "config.json"
        path.parent.mkdir()
        path.write_text(json.dumps({**to_hf_config(base.policy_spec), **changes}))
        return base.with_(policy=str(path))

    math = saved("math", max_position_embeddings=4096, rope_theta=10000.0)
    assert (math.policy_spec.max_position_embeddings, math.policy_spec.rope_theta) == (4096, 10000.0)
    assert first_difference(base, math) is None
    resized = saved("resized", vocab_size=base.policy_spec.vocab_size + 1)
    name, mine, theirs = first_difference(base, resized)
    assert name == "policy_spec" and mine.vocab_size + 1 == theirs.vocab_size
    assert first_difference(base, base.with_(attention_kernel="sdpa")) == ("attention_kernel", "eager", "sdpa")
    assert first_difference(base, base.with_(attention_kernel="sdpa"), skip=("attention_kernel",)) is None


KILLED_IN_A_REWARD = '''"""A metered GRPO run (full fine-tuning, beta > 0, num_iterations 2: old log-probs
and the reference are scored; evaluated every round) whose rewards are a reward model, then a function that
SIGKILLs the process at ``kill_at`` ("round": round 2's rewards; "evaluation": the evaluation at the end of round
1), after writing what the process executed since its last complete checkpoint (FlopCounterMode and its blind
spots: the meter's measure=True)."""
import json
import os
import signal
import sys
from pathlib import Path

from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from flopplan.runfile import last_complete_checkpoint
from flopplan.trl import meter


def executed_since_checkpoint(trainer, metered):
    checkpoint = last_complete_checkpoint(trainer.args.output_dir)
    saved = json.loads((checkpoint / "flopplan_ledger.json").read_text())["ledger"]["unit_measured"] \\
        if checkpoint is not None else {}
    running = sum(part["measured"][unit] + sum(part["blind"][unit].values())
                  for part in (metered.round, metered.evaluation) for unit in part["measured"])
    return sum(metered.ledger.unit_measured.values()) - sum(saved.values()) + running + metered.outside_units


def build(tiny, where, steps, kill_at=None):
    held = []

    def last_reward(completions, trainer_state, **kwargs):
        trainer, metered = held
        evaluating = not trainer.model.training
        if (kill_at, evaluating, trainer_state.global_step) in {("round", False, 2), ("evaluation", True, 2)}:
            (where / "executed.json").write_text(json.dumps(executed_since_checkpoint(trainer, metered)))
            os.kill(os.getpid(), signal.SIGKILL)
        return [0.0] * len(completions)

    rows = [{"prompt": f"{a}+{a + 1}="} for a in range(24)]
    policy = AutoModelForCausalLM.from_pretrained(tiny / "policy", attn_implementation="eager")
    reward = AutoModelForSequenceClassification.from_pretrained(tiny / "orm", num_labels=1,
                                                                attn_implementation="eager")
    args = GRPOConfig(output_dir=str(where / "trl"), per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=8, beta=0.04, num_iterations=2, max_steps=steps, use_cpu=True,
                      report_to="none", save_strategy="steps", save_steps=2, eval_strategy="steps", eval_steps=2,
                      per_device_eval_batch_size=8, logging_steps=1, disable_tqdm=True)
    trainer = GRPOTrainer(model=policy, reward_funcs=[reward, last_reward], args=args,
                          processing_class=AutoTokenizer.from_pretrained(tiny / "policy"),
                          reward_processing_classes=[AutoTokenizer.from_pretrained(tiny / "orm"), None],
                          train_dataset=Dataset.from_list(rows[8:]), eval_dataset=Dataset.from_list(rows[:8]))
    held += [trainer, meter(trainer, out=where / "run", measure=True, resume=kill_at is None)]
    return trainer


if __name__ == "__main__":
    build(Path(sys.argv[1]), Path(sys.argv[2]), 4, sys.argv[3]).train()
'''


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", ["round", "evaluation"])
def test_a_kill_in_a_reward_function_charges_every_forward_the_round_ran_before_it(tiny, tmp_path, kill_at):
    """A held-out user killed a run inside a reward function (here round 2): the scoring forwards (old log-probs, the
    reference) and a reward model's forward were recorded only when TRL's ``_generate_and_score_completions``
    returned, so the resume charged the rollout alone as lost work and the run spent more than its budget (and a
    kill in an evaluation's rewards lost its scoring forwards). Each forward is on disk as it ends now: killed
    (SIGKILL) in a reward function after them, in training and in an evaluation, the resumed run's lost work is
    what the killed process executed after its checkpoint, FlopCounterMode's count, FLOP for FLOP."""
    script = tmp_path / "killed.py"
    script.write_text(KILLED_IN_A_REWARD)
    killed = subprocess.run([sys.executable, str(script), str(tiny), str(tmp_path), kill_at], capture_output=True,
                            text=True, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)
    assert killed.returncode == -9, killed.stderr[-3000:]
    executed = json.loads((tmp_path / "executed.json").read_text())
    spec = importlib.util.spec_from_file_location("killed_in_a_reward", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(tiny, tmp_path, 2 if kill_at == "evaluation" else 4).train(resume_from_checkpoint=True)
    s = _summary(tmp_path / "run")
    assert executed > 0 and s["lost_flops"] == executed and s["lost_charged"]
    _exact(s)


def test_a_ctrl_c_during_the_evaluation_at_a_rounds_end_stops_there_with_its_checkpoint(tiny, tmp_path):
    """The meter decides at a round's end, before the evaluation due there: a Ctrl-C during that evaluation ran one
    more round before the run stopped. It stops after the evaluation, with that round's checkpoint, recorded as the
    stop, and the script ends with KeyboardInterrupt."""
    import signal

    from flopplan.trl import meter

    example, sent = _example(), []

    def accuracy(completions, answer, **kwargs):  # SIGINT once, during the first evaluation's rewards
        if not sent and not trainer.model.training:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)
        return example.accuracy_reward(completions, answer)

    make = _trainers(tiny, tmp_path)
    held_out = make().train_dataset.select(range(8))
    trainer = make(args=_grpo_args(tmp_path, max_steps=3, save_steps=1, eval_strategy="steps", eval_steps=1,
                                   per_device_eval_batch_size=8), eval_dataset=held_out, reward_funcs=[accuracy])
    meter(trainer, out=tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    s = _summary(tmp_path / "run")
    assert sent and s["steps"] == 1 and s["stop"]["reason"] == "interrupted", s["stop_reason"]
    assert "during its evaluation" in s["stop_reason"] and s["flops"]["evaluation"] > 0
    assert (tmp_path / "trl" / "checkpoint-1").is_dir() and not (tmp_path / "trl" / "checkpoint-2").exists()


def test_a_reference_of_the_policys_architecture_loaded_from_another_folder_is_accepted(tiny, tmp_path):
    """The check that the reference model is of the policy's architecture compared the specs whole, the folder each
    was loaded from included: a reference loaded from a copy of the policy's folder would have been refused."""
    import shutil

    from transformers import AutoModelForCausalLM

    from flopplan.trl import meter

    shutil.copytree(tiny / "policy", tmp_path / "reference")
    trainer = _trainers(tiny, tmp_path)(args=_grpo_args(tmp_path, beta=0.04))
    trainer.ref_model = AutoModelForCausalLM.from_pretrained(tmp_path / "reference")
    assert meter(trainer).recipe.beta == 0.04
