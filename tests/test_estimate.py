"""``flopplan estimate`` (flopplan.estimate): --json is exact, equal to FlopCounterMode for registry names and
config.json files; bad estimate input is one line and exit code 2."""

from __future__ import annotations

import json

import pytest
from configs import LLAMA_3_2_1B, MISTRAL_7B_V01, MISTRAL_7B_V03, QWEN3_0_6B
from helpers import cli, marked_slow_if_large, one_line_error, write_config

run = cli  # every command below runs in this process


def estimate_json(*args: str) -> dict:
    out = run("estimate", *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


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
    "rank above width": ["estimate", "--model", "qwen2.5-0.5b", "--phase", "train", "--seq", "16", "--lora-rank",
                         "100000"],
    "seq past the cap": ["estimate", "--model", "qwen2.5-0.5b", "--phase", "train", "--seq", "1" + "0" * 26],
    "batch past the cap": ["estimate", "--model", "qwen2.5-0.5b", "--phase", "forward", "--seq", "8", "--batch",
                           "1" + "0" * 26],
    "context past the cap": ["estimate", "--model", "qwen2.5-0.5b", "--phase", "decode", "--context", "1" + "0" * 26],
    "models context past the cap": ["models", "--context", "1" + "0" * 23],
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_exit_2(case):  # (a window beyond the context is not: test_sliding_window)
    one_line_error(run(*BAD[case]))


def test_malformed_config_file(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "qwen2", "hidden_size": ')
    out = run("estimate", "--model", str(bad), "--phase", "forward", "--seq", "8")
    assert out.returncode == 2 and "not valid JSON" in out.stderr and len(out.stderr.strip().splitlines()) == 1
