"""`flopplan plan`, `compare` and `tables` from the command line: where a plan goes, what defaults and recipe files
give, what is refused, what the messages say; the examples run."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, TINY, cli, one_line_error

from flopplan.passes import BUCKETS
from flopplan.recipe import Recipe

run = cli  # in this process; the no-torch check and the examples run in their own


def test_default_plan_json_has_the_documented_shape():
    out = run("plan", "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["budget_flops"] == 10**19
    assert [p["model"] for p in data["plans"]] == ["qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b",
                                                  "qwen2.5-14b"]
    for p in data["plans"]:
        for key in ("model", "reward", "steps", "prompts", "rollouts", "generated_tokens", "update_tokens",
                    "reward_evaluations"):
            assert isinstance(p[key], int) if key not in ("model", "reward") else isinstance(p[key], str)
        assert set(p["flops"]) == {*BUCKETS, "total"}
        assert all(isinstance(v, int) for v in p["flops"].values())
        assert p["flops"]["total"] == sum(p["flops"][b] for b in BUCKETS) <= data["budget_flops"]
        assert p["recipe"]["group_size"] == 8 and p["recipe"]["prompts_per_step"] == 64
        assert p["recipe"]["prompt_len"] == 256 and p["recipe"]["completion_len"] == 1024
        assert p["recipe"]["lora"]["rank"] == 64 and p["reward"] == "rule"


def test_plan_prices_a_number_of_steps():
    """--steps N without --solve: exactly N steps, every bucket N times the one-step cost, and the budget they
    need; with a profile, their time."""
    from flopplan.cost import step_cost

    out = run("plan", "--model", "qwen2.5-1.5b", "--steps", "100", "--format", "json")
    assert out.returncode == 0, out.stderr
    [entry] = json.loads(out.stdout)["plans"]
    one = step_cost(Recipe(policy="qwen2.5-1.5b"))
    assert entry["steps"] == 100 and entry["priced"] is True and entry["step_flops"] == one.step_flops
    assert entry["flops"] == {**{b: 100 * v for b, v in one.buckets().items()}, "total": 100 * one.step_flops}
    assert entry["budget"]["flops"] == entry["flops"]["total"] and entry["leftover_flops"] == 0
    assert entry["phases"]["update"]["flops"] == 100 * one.step_phases["update"]
    timed = json.loads(run("plan", "--model", "qwen2.5-1.5b", "--steps", "100", "--device", "h100",
                           "--format", "json").stdout)["plans"][0]
    assert timed["steps"] == 100 and timed["gpu_hours"] > 0 and set(timed["seconds"]) == set(one.step_phases)
    text = run("plan", "--model", "qwen2.5-1.5b", "--steps", "100").stdout
    assert "What 100 steps cost" in text and "the budget these steps need" in text


def test_plan_does_not_import_torch():
    code = ("import sys\nsys.argv=['flopplan','plan']\nfrom flopplan.cli import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code\nassert 'torch' not in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("fmt", ["table", "markdown", "latex", "csv"])
def test_every_format(fmt):
    out = run("plan", "--model", "qwen2.5-1.5b", "--format", fmt)
    assert out.returncode == 0, out.stderr
    assert "qwen2.5-1.5b" in out.stdout
    if fmt == "csv":
        rows = [r for r in csv.DictReader(io.StringIO(out.stdout.split("\n", 1)[1]))]
        assert int(rows[0]["flops_total"]) == sum(int(rows[0][f"flops_{b}"]) for b in BUCKETS)
    if fmt == "latex":
        assert "\\toprule" in out.stdout
    if fmt == "table":
        assert "EFLOP" in out.stdout and "%" in out.stdout


def test_recipe_file_and_overrides(tmp_path):
    saved = tmp_path / "recipe.toml"
    assert run("plan", "--model", "qwen2.5-3b", "--group-size", "16", "--save-recipe", str(saved)).returncode == 0
    data = json.loads(run("plan", "--recipe", str(saved), "--iterations", "2", "--format", "json").stdout)
    plan = data["plans"][0]
    assert plan["model"] == "qwen2.5-3b" and plan["recipe"]["group_size"] == 16
    assert plan["recipe"]["iterations"] == 2


def test_save_recipe_writes_the_solved_recipe(tmp_path):
    saved = tmp_path / "solved.toml"
    out = run("plan", "--model", "qwen2.5-1.5b", "--solve", "group_size", "--steps", "2000", "--save-recipe",
              str(saved), "--format", "json")
    solved = json.loads(out.stdout)["plans"][0]["recipe"]["group_size"]
    assert solved != 8 and Recipe.load(saved).group_size == solved


def test_lengths_file_survives_the_recipe_moving(tmp_path):
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("100\n300\n500\n")
    (tmp_path / "sub").mkdir()
    saved = tmp_path / "sub" / "r.toml"
    assert run("plan", "--model", "qwen2.5-0.5b", "--completion-len", f"@{lengths}", "--save-recipe",
               str(saved)).returncode == 0
    elsewhere = tmp_path / "sub"
    out = subprocess.run([sys.executable, "-m", "flopplan", "plan", "--recipe", str(saved), "--format", "json"],
                         capture_output=True, text=True, timeout=120, cwd=elsewhere)
    assert out.returncode == 0, out.stderr


def test_budget_units_and_time(tmp_path):
    data = json.loads(run("plan", "--model", "qwen2.5-1.5b", "--gpu-hours", "100", "--device", "h100",
                          "--format", "json").stdout)
    p = data["plans"][0]
    assert 99 < p["gpu_hours"] <= 100 and set(p["seconds"]) >= {"rollout.decode", "update"}
    data = json.loads(run("plan", "--model", "qwen2.5-1.5b", "--dollars", "500", "--device", "h200",
                          "--price-per-gpu-hour", "2.5", "--format", "json").stdout)
    assert data["plans"][0]["dollars"] <= 500


def test_inverse_modes():
    solved = json.loads(run("plan", "--model", "qwen2.5-1.5b", "--solve", "group_size", "--steps", "500",
                            "--format", "json").stdout)["plans"][0]
    assert solved["steps"] >= 500
    shared = json.loads(run("plan", "--model", "qwen2.5-1.5b", "--solve", "iterations",
                            "--target-learning-share", "0.9", "--format", "json").stdout)["plans"][0]
    assert abs(shared["shares"]["learning"] - 0.9) < 0.03
    largest = json.loads(run("plan", "--largest-model", "--steps", "300", "--format", "json").stdout)["plans"]
    assert largest[0]["model"] == "qwen2.5-3b" and largest[0]["steps"] >= 300


def test_compare_json():
    data = json.loads(run("compare", "--models", "qwen2.5-0.5b,qwen2.5-7b", "--rewards", "rule,prm",
                          "--format", "json").stdout)
    assert len(data["model_sizes"]) == 2 and len(data["feedback_systems"]) == 4
    assert data["model_sizes"][0]["steps"] > data["model_sizes"][1]["steps"]


def test_compare_csv_says_which_table_each_row_is_in():
    """A plan in both tables (qwen2.5-0.5b with the rule reward) was two identical CSV rows with nothing to tell
    the tables apart (a held-out user); each row now names its table, as the JSON's keys do."""
    out = run("compare", "--models", "qwen2.5-0.5b,qwen2.5-7b", "--rewards", "rule,prm", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out.stdout.split("\n", 1)[1])))
    data = json.loads(run("compare", "--models", "qwen2.5-0.5b,qwen2.5-7b", "--rewards", "rule,prm",
                          "--format", "json").stdout)
    for table in ("model_sizes", "feedback_systems"):
        mine = [(r["model"], r["reward"], int(r["flops_total"])) for r in rows if r["table"] == table]
        assert mine == [(e["model"], e["reward"], e["flops"]["total"]) for e in data[table]]
    assert len(rows) == 6


BAD = {
    "budget too small": (["plan", "--model", "qwen2.5-7b", "--budget", "1e12"], "one step costs"),
    "negative budget": (["plan", "--budget", "-5"], "positive"),
    "garbage budget": (["plan", "--budget", "lots"], "number"),
    "two budgets": (["plan", "--budget", "1e19", "--gpu-hours", "3"], "one budget"),
    "hours without device": (["plan", "--gpu-hours", "3"], "profile"),
    "dollars without price": (["plan", "--dollars", "3", "--device", "h100"], "price"),
    "unknown device": (["plan", "--gpu-hours", "3", "--device", "tpu9"], "unknown device"),
    "unknown model": (["plan", "--model", "gpt-9"], "unknown model"),
    "unknown reward": (["plan", "--reward", "vibes"], "unknown reward"),
    "negative group": (["plan", "--group-size", "-4"], "group_size"),
    "zero iterations": (["plan", "--iterations", "0"], "iterations"),
    "negative beta": (["plan", "--beta", "-1"], "beta"),
    "full and lora": (["plan", "--full", "--lora-rank", "8"], "contradict"),
    "prefix sharing hf": (["plan", "--prefix-sharing"], "vllm"),
    "bad length": (["plan", "--completion-len", "900:100"], "between"),
    "steps with a budget": (["plan", "--steps", "10", "--budget", "1e19"], "prices N steps"),
    "solve without steps": (["plan", "--solve", "group_size"], "steps"),
    "share without solve": (["plan", "--target-learning-share", "0.5"], "--solve"),
    "missing recipe": (["plan", "--recipe", "/no/such/recipe.toml"], "cannot read"),
    "micro batch": (["plan", "--micro-batch", "7"], "divide"),
    "policy with score head": (["plan", "--model", "qwen2.5-math-prm-7b"], "score head"),
    "compare unknown reward": (["compare", "--rewards", "rule,orm"], "orm"),
    "compare empty rewards": (["compare", "--rewards", ""], "--rewards"),
    "empty model": (["plan", "--model", ","], "model"),
    "huge budget": (["plan", "--budget", "1e400"], "beyond"),
    "nan budget": (["plan", "--budget", "nan"], "number"),
    "decimal comma": (["plan", "--budget", "6,5e19"], "comma"),  # not read as 65e19
    "negative price": (["plan", "--dollars", "5", "--device", "h100", "--price-per-gpu-hour", "-2"], "price"),
    "huge length": (["plan", "--completion-len", "500:100000000000"], "supported"),
    "unreachable mean": (["plan", "--completion-len", "1024.5:1024"], "between"),
    "largest with model": (["plan", "--largest-model", "--steps", "10", "--model", "qwen2.5-0.5b"],
                           "--largest-model"),
    "largest with solve": (["plan", "--largest-model", "--steps", "10", "--solve", "group_size"], "--solve"),
    "share and largest": (["plan", "--largest-model", "--target-learning-share", "0.5", "--solve", "iterations"],
                          "--target-learning-share"),
    "solve beyond the search": (["plan", "--model", "qwen2.5-0.5b", "--solve", "prompts_per_step", "--steps", "1",
                                 "--budget", "1e30"], "solve for steps instead"),
    "share and steps": (["plan", "--target-learning-share", "0.9", "--solve", "iterations", "--steps", "7"],
                        "--steps"),
    "experts of a dense model": (["plan", "--model", "qwen2.5-0.5b", "--experts", "eager"],
                                 "--experts applies to models with mixture-of-experts layers; qwen2.5-0.5b has none"),
    "experts of no compared model": (["compare", "--models", "qwen2.5-0.5b", "--rewards", "rule", "--experts",
                                      "batched_mm"], "--experts applies"),
    "a window of a model without one": (["plan", "--window", "windowed"], "--window applies to models with "
                                        "sliding-window attention layers; none of qwen2.5-0.5b"),
    "a window given to estimate": (["estimate", "--model", "qwen2.5-0.5b", "--phase", "forward", "--seq", "8",
                                    "--window", "windowed"], "--window applies"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_exit_2(case):  # (a window wider than the context is not: test_sliding_window)
    args, fragment = BAD[case]
    one_line_error(run(*args), fragment)


def test_the_recipe_line_names_the_experts_and_window_conventions_of_the_models_they_count():
    """--experts and --window change the counts of a mixture-of-experts and a sliding-window model (and no other:
    refused there, see BAD): the recipe line says which was counted, as estimate's line does."""
    moe = run("plan", "--model", "qwen2.5-0.5b,tiny-moe", "--full", "--experts", "eager", check=True).stdout
    assert "log-prob head fused-compact, experts eager\n" in moe and "windows" not in moe, moe
    window = run("plan", "--model", "gemma-3-1b", "--window", "windowed", check=True).stdout
    assert "log-prob head fused-compact, windows windowed\n" in window and "experts" not in window, window
    dense = run("plan", "--model", "qwen2.5-0.5b", check=True).stdout
    assert "log-prob head fused-compact\n" in dense


@pytest.mark.parametrize(("content", "fragment"), [
    (b"group_size = [\n", "malformed"), (b"\xff\xfe\x00", "UTF-8"), (b'grad_ckpt = "false"\n', "true or false"),
    (b"policy = 5\n", "policy"), (b'lora = { rank = 64, targets = [1, 2] }\n', "targets")])
def test_malformed_recipe_file(tmp_path, content, fragment):
    bad = tmp_path / "bad.toml"
    bad.write_bytes(content)
    out = run("plan", "--recipe", str(bad))
    assert out.returncode == 2 and fragment in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_tables_check_detects_a_stale_file(tmp_path):
    assert run("tables", "--out", str(tmp_path)).returncode == 0
    assert run("tables", "--out", str(tmp_path), "--check").returncode == 0
    target = tmp_path / "same_flop_sizes.md"
    target.write_text(target.read_text().replace("qwen2.5-7b", "qwen2.5-8b"))
    out = run("tables", "--out", str(tmp_path), "--check")
    assert out.returncode == 1 and "same_flop_sizes.md" in out.stderr
    assert f"(run `flopplan tables --out {tmp_path}`)" in out.stderr  # the folder it checked, not the default


EXAMPLES = {
    "plan_budget.sh": ["What 30 EFLOP buys", "solved: largest iterations", "GPU-hours"],
    "compare_sizes_and_feedback.sh": ["Feedback systems at equal FLOPs", "largest registry model"],
    "python_api.py": ["rollout.decode", "largest G for 400 steps", "grid of"],
    "plan_train_report.sh": ["plan file:", "FlopCounterMode vs closed form, phase by phase: equal", "spent / plan",
                             "plot:"],
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "plan_train_report.sh" else n
                                  for n in sorted(EXAMPLES)])
def test_examples_run(name, tmp_path):
    script = ROOT / "examples" / name
    cmd = [sys.executable, str(script)] if name.endswith(".py") else ["bash", str(script)]
    if name == "plan_train_report.sh":
        pytest.importorskip("torch")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               TMPDIR=str(tmp_path), FLOPPLAN_EXAMPLE_BUDGET="6e10")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr
    for fragment in EXAMPLES[name]:
        assert fragment in out.stdout, fragment


# -- where a plan goes ------------------------------------------------------------------------------------------

def test_dash_means_standard_output(tmp_path):
    out = cli(*TINY, "--out", "-")
    assert out.returncode == 0 and json.loads(out.stdout)["plans"][0]["model"] == "tiny"
    assert not Path("-").exists()
    recipe = cli(*TINY, "--save-recipe", "-")
    printed = tmp_path / "printed.toml"
    printed.write_text(recipe.stdout)
    assert recipe.returncode == 0 and Recipe.load(printed).policy == "tiny"
    one_line_error(cli(*TINY, "--out", "-", "--save-recipe", "-"), "both print")


# -- defaults ---------------------------------------------------------------------------------------------------

def test_an_empty_recipe_file_plans_the_default_sizes(tmp_path):
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    models = [p["model"] for p in json.loads(cli("plan", "--recipe", str(empty), "--json").stdout)["plans"]]
    assert models == ["qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b", "qwen2.5-7b", "qwen2.5-14b"]
    named = tmp_path / "named.toml"
    named.write_text('policy = "qwen2.5-3b"\n')
    assert [p["model"] for p in json.loads(cli("plan", "--recipe", str(named), "--json").stdout)["plans"]] == \
        ["qwen2.5-3b"]


def test_a_byte_order_mark_is_no_error(tmp_path):
    recipe = tmp_path / "bom.toml"
    recipe.write_bytes(b"\xef\xbb\xbfgroup_size = 4\n")
    assert json.loads(cli("plan", "--recipe", str(recipe), "--model", "tiny", "--json").stdout)["plans"][0][
        "recipe"]["group_size"] == 4


def test_a_repeated_model_is_planned_once():
    plans = json.loads(cli("plan", "--model", "tiny", "--model", "tiny,tiny", "--json").stdout)["plans"]
    assert [p["model"] for p in plans] == ["tiny"]


# -- messages ---------------------------------------------------------------------------------------------------

def test_a_budget_in_hours_is_not_called_a_same_flop_comparison():
    out = cli("plan", "--model", "qwen2.5-1.5b", "--gpu-hours", "10", "--device", "h100").stdout
    assert "same-budget comparison" in out and "same-FLOP" not in out


def test_one_step_is_not_one_steps():
    out = cli("plan", "--largest-model", "--steps", "1", "--budget", "1e12")
    assert "1 steps" not in out.stderr and "1 step" in out.stderr


def test_budget_messages_speak_of_units_not_field_names():
    out = cli("plan", "--gpu-hours", "-3", "--device", "h100")
    assert "gpu_hours" not in out.stderr


def _parse_flops(text: str) -> float:
    number, unit = text.split()
    return float(number) * {"E": 1e18, "P": 1e15, "T": 1e12}[unit[0]]


def test_rounding_never_reads_a_spend_or_a_step_as_equal_to_the_budget():
    """A held-out user's 1 EFLOP table said "spent 1 EFLOP" for 999.5 PFLOP (its neighbours "997 PFLOP"), and a
    refusal said the budget (3 PFLOP) buys no step because "one step costs 3 PFLOP": each figure now has the digits
    it takes to differ from the budget where it does, and reads within its last digit of the exact value."""
    out = run("plan", "--model", "qwen2.5-0.5b", "--budget", "1e18", "--format", "markdown").stdout
    exact = json.loads(run("plan", "--model", "qwen2.5-0.5b", "--budget", "1e18", "--json").stdout)
    total = exact["plans"][0]["flops"]["total"]
    assert total < 10**18
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| qwen2.5-0.5b")]
    assert len(rows) == 2  # the allocation table and the phase table: their last cell is the spend
    for row in rows:
        spent = row[-1].rstrip(" |")
        assert spent != "1 EFLOP" and abs(_parse_flops(spent) - total) < 0.001 * total, spent
    refusal = cli("plan", "--model", "qwen2.5-0.5b", "--budget", "3e15")
    step = refusal.stderr.rsplit("one step costs ", 1)[1].strip()
    assert refusal.returncode == 2 and step != "3 PFLOP" and _parse_flops(step) > 3e15, refusal.stderr


def test_a_cpu_profile_speaks_of_cpu_hours_and_cited_tables_state_their_recipe(tmp_path):
    """Time on a CPU profile was labelled GPU-hours; ``plan --format latex|markdown`` left out the recipe line that
    ``flopplan tables`` puts under its tables (held-out user); the phase table's shares read 3.5 % beside the
    allocation table's 23.2%."""
    profile = tmp_path / "cpu.json"
    profile.write_text(json.dumps({"flopplan_profile_version": 1, "device": "cpu (float32)", "peak_flops": 1e11,
                                   "efficiency": dict.fromkeys(("train", "forward", "prefill", "decode"), 0.5)}))
    out = cli("plan", "--model", "qwen2.5-0.5b", "--profile", str(profile), "--steps", "2")
    assert out.returncode == 0 and "CPU-hours" in out.stdout and "GPU-hours" not in out.stdout, out.stdout
    gpu = cli("plan", "--model", "qwen2.5-0.5b", "--device", "h100", "--steps", "2")
    assert "GPU-hours" in gpu.stdout and "CPU-hours" not in gpu.stdout
    for fmt in ("markdown", "latex"):
        text = run("plan", "--model", "qwen2.5-0.5b", "--format", fmt).stdout
        assert "recipe: LoRA r=64" in text and " %" not in text.replace("\\%", "%"), text


def test_a_budget_title_and_its_spends_never_read_alike_and_time_and_leftovers_say_which_plan(tmp_path):
    """A re-check of the rounding mend: a 3,001,575,066,487,296-FLOP budget was titled "3 PFLOP" above a spend of
    "3.00157 PFLOP"; 99.98 GPU-hours of a 100 GPU-hour budget read "100"; a CPU profile's budget was titled in
    GPU-hours; compare's leftover note named each model once, without the PRM plans under the same table; a "<"
    in a LaTeX note is an inverted "!" in text mode."""
    budget = 3_001_575_066_487_296
    out = run("plan", "--model", "qwen2.5-0.5b", "--budget", str(budget), "--format", "markdown").stdout
    title = next(line for line in out.splitlines() if line.startswith("### What"))
    row = next(line for line in out.splitlines() if line.startswith("| qwen2.5-0.5b")).split(" | ")
    spent = row[-1].rstrip(" |")
    shown = title.removeprefix("### What ").split(" buys")[0]
    assert _parse_flops(spent) <= _parse_flops(shown) and spent != shown, (title, spent)
    hours = run("plan", "--model", "qwen2.5-7b", "--gpu-hours", "100", "--device", "h100", "--format", "csv")
    exact = float(next(csv.DictReader(io.StringIO(hours.stdout.split("\n", 1)[1])))["gpu_hours"])
    table = run("plan", "--model", "qwen2.5-7b", "--gpu-hours", "100", "--device", "h100", "--format", "markdown")
    cell = next(line for line in table.stdout.splitlines() if line.startswith("| qwen2.5-7b")).split(" | ")[-1]
    assert exact < 100 and float(cell.rstrip(" |")) < 100, cell
    profile = tmp_path / "cpu.json"
    profile.write_text(json.dumps({"flopplan_profile_version": 1, "device": "cpu (float32)", "peak_flops": 1e11,
                                   "efficiency": dict.fromkeys(("train", "forward", "prefill", "decode"), 0.5)}))
    cpu = cli("plan", "--model", "tiny", "--profile", str(profile), "--gpu-hours", "1")
    assert "What 1 CPU-hours buys" in cpu.stdout, cpu.stdout
    short = cli("plan", "--model", "tiny", "--profile", str(profile), "--gpu-hours", "0.0001")
    assert "the budget (0.0001 CPU-hours) buys no step" in short.stderr, short.stderr
    compare = run("compare", "--models", "qwen2.5-1.5b,qwen2.5-7b", "--rewards", "rule,prm", "--budget", "1e18",
                  "--format", "latex").stdout
    leftover = " ".join(compare.split()).split("leftover per plan")[-1]
    assert leftover.count("prm:qwen2.5-math-prm-7b") == 2 and leftover.count("(rule)") == 2, leftover
    assert "\\textless{}" in compare and "(< one" not in compare
    dollars = json.loads(run("plan", "--model", "qwen2.5-7b", "--dollars", "200", "--price-per-gpu-hour", "2",
                             "--device", "h100", "--json").stdout)["plans"][0]
    assert dollars["dollars"] < 200 and dollars["dollars"] == pytest.approx(dollars["gpu_hours"] * 2, rel=1e-5)


def test_a_compare_that_buys_no_step_names_each_rows_model_and_reward_system_once():
    """compare's refusal listed "qwen2.5-7b: one step costs 0.0333 GPU-hours; qwen2.5-7b: ... 0.0345 ...": the same
    model at other costs, with no word of the reward system that made them differ."""
    result = cli("compare", "--models", "qwen2.5-7b,qwen2.5-0.5b", "--gpu-hours", "1e-7", "--device", "h100")
    one_line_error(result, "the budget (1e-07 GPU-hours) buys no step of any model: qwen2.5-7b with reward rule: ")
    parts = result.stderr.strip().split(": ", 2)[2].split("; ")
    assert len(parts) == len(set(parts)) == 8 and all(" with reward " in part for part in parts), parts
