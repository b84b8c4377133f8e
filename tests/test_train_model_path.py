"""A run of a local model (``--model-path``): the budget guard and the record price the model that loads, not the
default policy; a named policy of other shapes is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import cli, one_line_error

pytest.importorskip("torch")
pytest.importorskip("peft")

ROUND = ["--full", "--group-size", "2", "--prompts-per-step", "2", "--micro-batch", "2", "--completion-len", "3",
         "--no-eval", "--no-progress"]


@pytest.fixture(scope="module")
def larger_model(tmp_path_factory) -> Path:
    """A Qwen3 policy four times wider than ``tiny``, saved with the built-in characters' tokenizer."""
    import torch
    import transformers

    from flopplan.grpo.codecs import hf_char_tokenizer

    tokenizer = hf_char_tokenizer()
    cfg = transformers.Qwen3Config(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=64, vocab_size=len(tokenizer),
                                   tie_word_embeddings=True, max_position_embeddings=256,
                                   pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    folder = tmp_path_factory.mktemp("models") / "wide"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _step_flops(policy: str) -> int:
    result = cli("plan", "--model", policy, *ROUND[:-2], "--prompt-len", "8", "--steps", "1", "--format", "json",
                 check=True)
    return int(json.loads(result.stdout)["plans"][0]["step_flops"])


def test_a_local_model_run_never_exceeds_its_budget_and_records_the_loaded_policy(larger_model, tmp_path):
    own = str(larger_model / "config.json")
    assert _step_flops(own) > 2 * _step_flops("tiny")  # priced as tiny, the guard would let 5 steps through
    budget = int(2.5 * _step_flops(own))
    run = tmp_path / "run"
    cli("train", "--out", str(run), "--model-path", str(larger_model), *ROUND, "--budget", str(budget), check=True)
    steps = [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines() if line]
    charged = sum(sum(c["executed"].values()) for step in steps for c in step["charges"])
    assert steps and charged <= budget
    config = json.loads((run / "config.json").read_text())
    assert config["recipe"]["policy"] == own
    summary = json.loads((run / "summary.json").read_text())
    assert summary["flops"]["total"] == charged and summary["model"] == "wide"


def test_a_named_policy_of_other_shapes_than_the_loaded_model_is_refused(larger_model, tmp_path):
    one_line_error(cli("train", "--out", str(tmp_path / "a"), "--model", "tiny", "--model-path", str(larger_model),
                       *ROUND, "--steps", "1"), "not the recipe's policy tiny")
    plan = tmp_path / "plan.json"
    cli("plan", "--model", "tiny", *ROUND[:-2], "--prompt-len", "8", "--budget", "1e12", "--out", str(plan),
        check=True)
    one_line_error(cli("train", "--out", str(tmp_path / "b"), "--plan", str(plan), "--model-path", str(larger_model),
                       "--steps", "1", "--no-progress"), "so that the budget guard prices the model that runs")
