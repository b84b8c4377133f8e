"""The validating GRPO run: it learns, its ledger equals FlopCounterMode, it resumes exactly, it never overspends."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from helpers import cli, one_line_error

pytest.importorskip("torch")
pytest.importorskip("peft")

SMALL = ["--prompts-per-step", "4", "--group-size", "4", "--micro-batch", "8", "--no-progress"]


def flopplan(*args: str, check: bool = True) -> object:
    """A run in this process (the trainer's global seeding and thread count are per run, so runs in one worker
    give the same results as runs in fresh processes); kills and Ctrl-C below use real subprocesses."""
    return cli(*args, check=check)


def summary_of(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def metrics_of(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]


@pytest.mark.slow
def test_tiny_policy_learns_the_builtin_task_within_its_budget(tmp_path):
    """From random initialisation to at least twice chance held-out accuracy, under a fixed FLOP budget."""
    run = tmp_path / "learn"
    budget = 600_000_000_000  # about 65 steps of the default recipe
    flopplan("train", "--out", str(run), "--budget", str(budget), "--seed", "0", "--no-progress")
    s = summary_of(run)
    accuracy = s["eval_accuracy"]
    chance = s["chance"]
    assert accuracy[0][0] == 0 and accuracy[0][1] <= chance  # the baseline, before any update
    assert accuracy[-1][1] >= 2 * chance, accuracy
    assert s["flops"]["total"] <= budget
    assert s["stop_reason"].startswith("budget")


@pytest.mark.slow
def test_ledger_equals_flop_counter_for_every_phase(tmp_path):
    """LoRA with checkpointing, beta > 0 (reference = base with the adapter disabled), mu = 2 (old logprobs),
    a PRM, variable completion lengths, evaluation: FlopCounterMode equals the closed form phase by phase."""
    run = tmp_path / "measured"
    flopplan("train", "--out", str(run), "--steps", "3", *SMALL, "--lora-rank", "8", "--beta", "0.05",
             "--iterations", "2", "--reward", "prm:tiny", "--completion-len", "5", "--eval-every", "2",
             "--eval-prompts", "12", "--measure-flops")
    s = summary_of(run)
    assert s["measured_equals_closed_form"] is True
    assert s["measured_flops"] == s["flops"]
    phases = s["measured_by_unit"]
    assert set(phases) == {"rollout", "old_logprobs", "reference", "reward", "update", "eval"}
    for unit, values in phases.items():
        assert values["measured"] == values["closed_form"] > 0, unit
    assert s["random_init_reward_model"] is True


@pytest.mark.slow
def test_ledger_equals_flop_counter_full_fine_tuning_orm_all_logits(tmp_path):
    run = tmp_path / "measured-full"
    flopplan("train", "--out", str(run), "--steps", "2", *SMALL, "--full", "--reward", "orm:tiny",
             "--old-logprobs", "on", "--no-grad-ckpt", "--logits", "all", "--completion-len", "4",
             "--update-padding", "none", "--no-eval", "--measure-flops")
    s = summary_of(run)
    assert s["measured_equals_closed_form"] is True and s["measured_flops"] == s["flops"]
    assert s["flops"]["total"] > s["useful_flops"]["total"] or s["flops"] == s["useful_flops"]


CLOCKS = ("time", "process_started", "cpu_seconds")  # clock fields of a metrics line


def _metrics_without_clocks(run: Path) -> list[dict]:
    """metrics.jsonl without its wall-clock fields (``time``, ``process_started`` and any per-phase ``seconds``)."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in CLOCKS and "seconds" not in k}
        return value

    return [strip(line) for line in metrics_of(run)]


@pytest.mark.slow
def test_measuring_flops_does_not_change_the_run(tmp_path):
    """--measure-flops counts without changing what runs: the same seed gives bit-identical metrics (losses,
    grad norms, rewards, accuracies as exact floats) with and without the meter, and the count stays exact."""
    common = ["--steps", "6", "--budget", "600000000000", "--seed", "0", "--eval-every", "3", "--no-progress"]
    plain, measured = tmp_path / "plain", tmp_path / "measured"
    flopplan("train", "--out", str(plain), *common)
    flopplan("train", "--out", str(measured), *common, "--measure-flops")
    assert _metrics_without_clocks(measured) == _metrics_without_clocks(plain)
    assert summary_of(measured)["measured_equals_closed_form"] is True


@pytest.mark.slow
def test_budget_is_never_exceeded_with_variable_lengths(tmp_path):
    run = tmp_path / "budget"
    budget = 9_000_000_000
    flopplan("train", "--out", str(run), "--budget", str(budget), *SMALL, "--completion-len", "8",
             "--temperature", "1.5", "--no-eval")
    s = summary_of(run)
    lengths = [m["completion_tokens"] for m in metrics_of(run) if m["step"] > 0]
    assert len(set(lengths)) > 1  # completions really vary
    assert s["flops"]["total"] <= budget and s["steps"] >= 1
    assert s["stop"]["reason"] == "budget" and s["stop"]["round"] == s["steps"] + 1
    worst_next = s["stop"]["bound_flops"]
    assert s["flops"]["total"] + worst_next > budget  # it stopped only because the next step might not fit


@pytest.mark.slow
@pytest.mark.xdist_group("planned_run")
def test_plan_train_report(planned_run, tmp_path):
    plan, run = planned_run
    s = summary_of(run)
    planned = json.loads(plan.read_text())["plans"][0]
    assert s["plan"]["steps"] == planned["steps"] and s["plan"]["flops"] == planned["flops"]
    assert s["flops"]["total"] <= planned["budget_flops"]
    assert s["steps"] >= planned["steps"]  # completions are at most the planned length
    assert s["measured_equals_closed_form"] is True and s["plan"]["overridden"] == []
    assert re.fullmatch(r"CPU .+ \(\d+ threads?\)", s["hardware"])  # the machine, for calibrate --from-runs
    out = flopplan("report", str(run), "--json", "--plot", str(tmp_path / "curves.png"))
    data = json.loads(out.stdout)
    assert data["flops"] == s["flops"] and Path(data["plot"]).exists()
    text = flopplan("report", str(run), "--no-plot").stdout
    assert "spent / plan" in text and "learning" in text and "changed the plan's recipe" not in text
    pdf = tmp_path / "curves.pdf"
    flopplan("report", str(run), "--plot", str(pdf))
    assert pdf.read_bytes().startswith(b"%PDF")  # the suffix chooses the format
    one_line_error(flopplan("report", str(run), "--plot", str(tmp_path / "curves.nope"), check=False),
                   "cannot write the plot")


@pytest.mark.slow
@pytest.mark.xdist_group("planned_run")
def test_existing_run_folder_is_not_overwritten(planned_run):
    _, run = planned_run
    one_line_error(flopplan("train", "--out", str(run), "--steps", "1", *SMALL, "--no-eval", check=False),
                   "--resume")


def test_jsonl_dataset_with_gsm8k_answers(tmp_path):
    data = tmp_path / "train.jsonl"
    lines = [json.dumps({"prompt": f"{a}+{b}=", "answer": f"step by step #### {a + b}"})
             for a in range(10) for b in range(10)]
    data.write_text("\n".join(lines) + "\n")
    run = tmp_path / "jsonl"
    flopplan("train", "--out", str(run), "--dataset", str(data), "--eval-dataset", str(data), "--steps", "2",
             *SMALL, "--completion-len", "3", "--eval-every", "2", "--eval-prompts", "20")
    assert summary_of(run)["steps"] == 2 and len(metrics_of(run)) == 3


def test_a_dataset_runs_config_names_no_builtin_task_and_resumes(tmp_path):
    """config.json said "task": "digits" of a --dataset run, whose prompts were the dataset's: it records task null
    now (its dataset under "dataset"); such a run resumes, and so does one whose config.json an older flopplan wrote
    with "digits"."""
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{a}+{b}=", "answer": str(a + b)}) + "\n"
                            for a in range(5) for b in range(5)))
    run = tmp_path / "run"
    flopplan("train", "--out", str(run), "--dataset", str(data), "--steps", "1", *SMALL, "--completion-len", "2",
             "--no-eval")
    config = json.loads((run / "config.json").read_text())
    assert config["task"] is None and config["dataset"] == str(data)
    flopplan("train", "--out", str(run), "--resume", "--steps", "2", "--no-progress")
    assert json.loads((run / "config.json").read_text())["task"] is None
    (run / "config.json").write_text(json.dumps({**config, "task": "digits"}))  # as an older flopplan wrote it
    flopplan("train", "--out", str(run), "--resume", "--steps", "3", "--no-progress")
    assert summary_of(run)["steps"] == 3 and json.loads((run / "config.json").read_text())["task"] is None
    (run / "config.json").write_text(json.dumps({**config, "dataset": None}))  # no task and no dataset: refused
    one_line_error(flopplan("train", "--out", str(run), "--resume", "--steps", "4", "--no-progress", check=False),
                   "task: null is a dataset run's")


@pytest.mark.slow
def test_registry_architecture_without_weights(tmp_path):
    run = tmp_path / "qwen"
    flopplan("train", "--out", str(run), "--model", "qwen2.5-0.5b", "--random-init", "--steps", "1",
             "--prompts-per-step", "1", "--group-size", "2", "--micro-batch", "2", "--completion-len", "2",
             "--lora-rank", "4", "--no-eval", "--no-progress", "--measure-flops")
    s = summary_of(run)
    assert s["model"] == "qwen2.5-0.5b" and s["random_init_policy"] and s["measured_equals_closed_form"]


@pytest.mark.slow
def test_resume_from_a_moved_folder_and_extend(tmp_path):
    first = tmp_path / "first"
    flopplan("train", "--out", str(first), "--steps", "2", *SMALL, "--no-eval")
    moved = tmp_path / "moved"
    first.rename(moved)
    flopplan("train", "--out", str(moved), "--resume", "--steps", "3", "--no-progress")
    s = summary_of(moved)
    assert s["steps"] == 3 and [m["step"] for m in metrics_of(moved)] == [1, 2, 3]
    assert not first.exists()
    out = flopplan("train", "--out", str(moved), "--resume", "--budget", "1000", check=False)
    assert out.returncode == 2 and "already spent" in out.stderr
    # the refused extension left the run as it was: it still resumes and extends
    assert json.loads((moved / "config.json").read_text())["budget_flops"] is None
    out = flopplan("train", "--out", str(moved), "--resume", "--lr", "0.1", check=False)
    assert out.returncode == 2 and "--lr" in out.stderr  # a resumed run keeps its configuration
    flopplan("train", "--out", str(moved), "--resume", "--steps", "4", "--no-progress")
    assert summary_of(moved)["steps"] == 4


def test_corrupt_checkpoint_and_logs(tmp_path):
    run = tmp_path / "corrupt"
    flopplan("train", "--out", str(run), "--steps", "1", *SMALL, "--no-eval")
    with open(run / "metrics.jsonl", "a") as handle:
        handle.write('{"step": 2, "rew')  # a line a kill cut short
    flopplan("train", "--out", str(run), "--resume", "--steps", "2", "--no-progress")
    assert [m["step"] for m in metrics_of(run)] == [1, 2]
    step_two = json.loads((run / "ledger.jsonl").read_text().splitlines()[-1])
    spent_on_step_two = sum(sum(c["executed"].values()) for c in step_two["charges"])
    # the newest checkpoint is unreadable: resume from the newest good one, say so, and charge step 2 as lost
    (run / "checkpoints" / "step-000002.pt").write_bytes(b"garbage")
    out = flopplan("train", "--out", str(run), "--resume", "--steps", "3")
    assert "step-000002.pt cannot be read" in out.stdout and "resumed from step-000001.pt" in out.stdout
    s = summary_of(run)
    assert s["steps"] == 3 and [m["step"] for m in metrics_of(run)] == [1, 2, 3]
    assert s["lost_flops"] == spent_on_step_two > 0
    # a deleted log would lose the run's history: refused, not silently restarted
    (run / "ledger.jsonl").unlink()
    one_line_error(flopplan("train", "--out", str(run), "--resume", "--steps", "4", check=False),
                   "ledger.jsonl is missing")
    # no readable checkpoint at all: one line
    for checkpoint in (run / "checkpoints").glob("step-*.pt"):
        checkpoint.write_bytes(b"garbage")
    one_line_error(flopplan("train", "--out", str(run), "--resume", "--steps", "4", check=False), "cannot be read")


BAD_TRAIN = {
    "no budget": (["--steps", "0"], "positive"),
    "negative seed": (["--steps", "1", "--seed", "-1"], "seed"),
    "zero alpha": (["--steps", "1", "--lora-rank", "4", "--lora-alpha", "0"], "lora_alpha"),
    "clip above one": (["--steps", "1", "--clip-eps", "1.5"], "clip"),
    "reward path with rule": (["--steps", "1", "--reward-model-path", "tests"], "model reward"),
    "huge budget": (["--budget", "1e400"], "at most 1e30"),
    "score head policy": (["--model", "qwen2.5-math-prm-7b", "--random-init", "--steps", "1"], "score head"),
    "small vocab reward": (["--steps", "1", "--reward", "orm:SMALLVOCAB"], "embeddings"),
    "no weights": (["--model", "qwen2.5-7b", "--steps", "1"], "no weights"),
    "vllm": (["--engine", "vllm", "--steps", "1"], "engine"),
    "missing plan": (["--plan", "/no/such/plan.json"], "cannot read"),
    "not a plan": (["--plan", "README.md"], "not valid JSON"),
    "bad dataset": (["--dataset", "/no/such.jsonl", "--steps", "1"], "cannot read"),
    "bad task": (["--task", "chess", "--steps", "1"], "unknown task"),
    "resume nothing": (["--resume"], "nothing to resume"),
    "plan of numbers": (["--plan", "PLAN_NUMBERS"], "malformed"),
    "plan budget text": (["--plan", "PLAN_TEXT_BUDGET"], "budget"),
    "plan flops not buckets": (["--plan", "PLAN_FLAT_FLOPS"], "flops must map"),
    "plan model without plan": (["--plan-model", "tiny", "--steps", "1"], "--plan"),
    "eval dataset alone": (["--eval-dataset", "README.md", "--steps", "1"], "--dataset"),
    "old logprobs off with mu 2": (["--steps", "1", "--iterations", "2", "--old-logprobs", "off"], "clip"),
    "too many problems": (["--steps", "1", "--train-size", "20000000"], "train_size"),
    "out under a file": (["--steps", "1", "--out", "FILE/run"], "cannot write the run folder"),
    "out is a model folder": (["--steps", "1", "--out", "MODEL_DIR"], "not a flopplan run"),
    "model folder without weights": (["--steps", "1", "--model-path", "MODEL_DIR"], "cannot load"),
    "weights beyond memory": (["--steps", "1", "--model", "qwen2.5-72b", "--random-init"], "do not fit"),
}


@pytest.mark.parametrize("case", sorted(BAD_TRAIN))
def test_bad_train_input(tmp_path, case):
    args, fragment = BAD_TRAIN[case]
    numbers = tmp_path / "numbers.json"
    numbers.write_text(json.dumps({"flopplan_plan_version": 1, "plans": [1]}))
    text_budget = tmp_path / "text.json"
    buckets = {"rollout": 1, "learning": 1, "feedback": 0, "evaluation": 0, "total": 2}
    entry = {"model": "tiny", "recipe": {"policy": "tiny"}, "budget": {"flops": "lots"}, "steps": 1,
             "flops": buckets}
    text_budget.write_text(json.dumps({"flopplan_plan_version": 1, "plans": [entry]}))
    small = tmp_path / "small" / "config.json"
    small.parent.mkdir()
    small.write_text(json.dumps({"model_type": "qwen2", "hidden_size": 32, "intermediate_size": 64,
                                 "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
                                 "vocab_size": 12}))
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"flopplan_plan_version": 1, "plans": [
        {"model": "tiny", "recipe": {"policy": "tiny"}, "budget": {"flops": 10**12}, "steps": 3, "flops": 7}]}))
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    model_dir = tmp_path / "model"  # a model folder: its config, no weights, no tokenizer
    model_dir.mkdir()
    (model_dir / "config.json").write_text(small.read_text())
    replace = {"PLAN_NUMBERS": str(numbers), "PLAN_TEXT_BUDGET": str(text_budget), "PLAN_FLAT_FLOPS": str(flat),
               "orm:SMALLVOCAB": f"orm:{small}", "FILE/run": str(a_file / "run"), "MODEL_DIR": str(model_dir)}
    args = [replace.get(a, a) for a in args]
    out_args = [] if "--out" in args else ["--out", str(tmp_path / "bad")]
    one_line_error(flopplan("train", *out_args, *args, check=False), fragment)


def test_a_reward_model_folder_flopplan_cannot_run_is_refused_with_what_it_holds_and_what_runs(tmp_path):
    """A held-out user: a token-classification folder given as ``orm:DIR/config.json`` was refused as "not a prm-orm
    (hidden 64, 2 layers, head lm): give --reward orm:ARCH with its architecture" (what was given, and no LM head);
    a PRM folder under ``prm:qwen2.5-math-prm-7b`` was told to give ``orm:ARCH`` too; only ``prm:DIR/config.json``
    reached the documented refusal (a local PRM needs its own modeling code). Each now says what the folder holds
    and what flopplan runs: local outcome reward models only; PRMs as registry architectures, random-initialised.
    Refused from its config alone (no weights read), nothing written."""
    def folder(name: str, architecture: str) -> Path:
        path = tmp_path / name
        path.mkdir()
        (path / "config.json").write_text(json.dumps({
            "architectures": [architecture], "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
            "num_labels": 2}))
        return path

    token, prm, orm = (folder("token", "Qwen2ForTokenClassification"), folder("prm", "Qwen2ForProcessRewardModel"),
                       folder("orm", "Qwen2ForSequenceClassification"))
    base = ["train", "--model", "tiny", "--steps", "1", "--no-eval", *SMALL, "--out", str(tmp_path / "run")]
    runs_orms_only = "flopplan runs local outcome reward models only"
    registry_prm = "--reward prm:NAME without --reward-model-path (a registry PRM architecture, random-initialised)"
    for reward, path, fragment in (
            (f"orm:{token}/config.json", token, "holds a token-classification model (Qwen2ForTokenClassification"),
            ("prm:qwen2.5-math-prm-7b", token, "holds a token-classification model (Qwen2ForTokenClassification"),
            ("prm:qwen2.5-math-prm-7b", prm, "holds a process reward model (Qwen2ForProcessRewardModel: a local "
                                             "PRM needs its own modeling code"),
            (f"prm:{prm}/config.json", prm, "holds a process reward model (Qwen2ForProcessRewardModel"),
            (f"orm:{prm}/config.json", prm, "holds a process reward model (Qwen2ForProcessRewardModel")):
        line = one_line_error(cli(*base, "--reward", reward, "--reward-model-path", str(path)), fragment)
        assert runs_orms_only in line and registry_prm in line, line
        assert "orm:ARCH" not in line and "head lm" not in line, line
    line = one_line_error(cli(*base, "--reward", "prm:tiny", "--reward-model-path", str(orm)),
                          "--reward prm:tiny is a process reward model, but --reward-model-path")
    assert f"holds an outcome reward model (Qwen2ForSequenceClassification): give --reward orm:{orm}/config.json" \
        in line and registry_prm in line, line
    assert not (tmp_path / "run").exists()

    import torch

    from flopplan.errors import UserError
    from flopplan.grpo.codecs import char_codec
    from flopplan.grpo.rewards import RewardModel
    from flopplan.grpo.tokenizer import CharTokenizer
    from flopplan.recipe import RewardSystem

    def load(reward: str, path: Path) -> str:  # the Python API says what the CLI says (it said "not a
        with pytest.raises(UserError) as refused:  # sequence-classification model", whatever the folder held)
            RewardModel.load(RewardSystem.parse(reward), torch.device("cpu"), torch.float32, "eager", 0,
                             char_codec(CharTokenizer()),
                             23, path=str(path))
        return str(refused.value)

    assert "holds a token-classification model (Qwen2ForTokenClassification" in load("orm:tiny-rm", token)
    assert "holds a process reward model (Qwen2ForProcessRewardModel" in load("prm:tiny", prm)
    assert registry_prm in load("orm:tiny-rm", prm)
    assert f"score with it as orm:{orm}/config.json" in load("prm:tiny", orm)


def test_builtin_task_holds_out_unseen_strings():
    from flopplan.grpo.tasks import DigitTask

    train, held_out = DigitTask().split(20_000, 200, seed=3)
    assert len(held_out) == 200 and len(train) == 10_000 - 200
    assert not {p.prompt for p in train} & {p.prompt for p in held_out}
    assert len({p.prompt for p in train}) == len(train)


@pytest.fixture(autouse=True)
def _quiet_env(monkeypatch):
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("PYTHONWARNINGS", os.environ.get("PYTHONWARNINGS", "ignore"))


def test_run_that_changes_the_plan_recipe_says_so(tmp_path):
    plan = tmp_path / "plan.json"
    flopplan("plan", "--model", "tiny", "--full", "--prompts-per-step", "4", "--group-size", "4", "--prompt-len", "10",
             "--completion-len", "2", "--micro-batch", "16", "--budget", "1e10", "--out", str(plan),
             "--format", "json")
    run = tmp_path / "changed"
    flopplan("train", "--plan", str(plan), "--out", str(run), "--micro-batch", "8", "--steps", "1", "--no-progress")
    assert summary_of(run)["plan"]["overridden"] == ["micro_batch"]
    assert "changed the plan's recipe (micro_batch)" in flopplan("report", str(run)).stdout


def test_default_recipe_with_another_round_size(tmp_path):
    """The default micro-batch (64) fits the default round (16 x 16); another round size drops it."""
    run = tmp_path / "round"
    flopplan("train", "--out", str(run), "--prompts-per-step", "2", "--group-size", "2", "--steps", "1", "--no-eval",
             "--no-progress")
    assert summary_of(run)["steps"] == 1


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_full_fine_tuning_on_gpu_keeps_float32_master_weights(tmp_path):
    """On a GPU full fine-tuning runs under bf16 autocast with float32 weights (bf16 weights would round tiny
    AdamW steps away); the FLOPs are the same closed form."""
    import torch

    run = tmp_path / "gpu"
    flopplan("train", "--out", str(run), "--device", "cuda", "--steps", "2", *SMALL, "--no-eval", "--measure-flops")
    s = summary_of(run)
    assert s["dtype"] == "float32 weights, bfloat16 autocast" and s["measured_equals_closed_form"]
    state = torch.load(sorted((run / "checkpoints").iterdir())[-1], weights_only=False)
    assert all(v.dtype == torch.float32 for v in state["trainable"].values())


def test_lost_work_outside_the_budget_is_recorded_not_charged():
    from flopplan.ledger import Ledger
    from flopplan.report.run_report import run_tables
    from flopplan.runfile import RunSummary

    for charge_lost in (True, False):
        ledger = Ledger(800, charge_lost=charge_lost)
        ledger.executed["update"] = 600
        ledger.lost = 300
        assert ledger.spent_in_total == 900
        assert ledger.remaining == (-100 if charge_lost else 200)
        restored = Ledger.from_state(json.loads(json.dumps(ledger.to_state())))
        assert restored.charge_lost is charge_lost and restored.remaining == ledger.remaining
        summary = RunSummary.from_data({**RunSummary("tiny", "rule", 1, None, {"total": 0}, {"total": 0}).to_data(),
                                        **ledger.totals()})
        assert summary.lost_charged is charge_lost and summary.within_budget is not charge_lost
        spent = next(n for n in run_tables(summary)[1] if n.startswith(("spent", "charged")))
        assert spent == ("spent 900 of 800 FLOPs (112.5 %): OVER THE BUDGET (including 300 FLOPs lost to a kill)"
                         if charge_lost else "charged 600 of 800 FLOPs (75.0 %): within the budget; 300 FLOPs lost "
                         "to a kill recorded, not charged (--lost-outside-budget): 900 spent in all")


@pytest.mark.parametrize("limit", [["--steps", "3"], ["--budget", "6e9"]], ids=["steps", "budget"])
def test_eval_at_end_evaluates_after_the_last_step(tmp_path, limit):
    """--eval-at-end: the last step evaluates (by --steps, or because the budget, an evaluation kept in reserve,
    leaves no room for another step), and the budget holds with it."""
    out = tmp_path / "run"
    cli("train", "--model", "tiny-s", "--full", "--prompts-per-step", "4", "-G", "4", "--eval-every", "1000",
        "--eval-prompts", "8", "--eval-targets", "heldout,long", "--eval-at-end", "--no-progress", "--out",
        str(out), *limit, check=True)
    s = summary_of(out)
    evaluated = sorted({json.loads(line)["step"] for line in (out / "evaluations.jsonl").read_text().splitlines()})
    assert evaluated == [0, s["steps"]] and s["steps"] >= 2 and s["within_budget"]
