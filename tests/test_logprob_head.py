"""The built-in trainer's chunked log-prob head: the same values and gradients as the model's own head, and the
FLOPs the ledger charges for TRL's fused heads, measured."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from helpers import cli  # noqa: E402

from flopplan.grpo import logprob_head  # noqa: E402


@pytest.mark.parametrize("chunk", [3, 4096])
def test_chunked_log_probs_and_gradients_equal_the_plain_head(monkeypatch, chunk):
    monkeypatch.setattr(logprob_head, "TOKEN_CHUNK", chunk)
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(10, 8, generator=gen, dtype=torch.float32, requires_grad=True)
    weight = torch.randn(13, 8, generator=gen, dtype=torch.float32, requires_grad=True)
    targets = torch.randint(0, 13, (10,), generator=gen)
    upstream = torch.randn(10, generator=gen, dtype=torch.float32)
    plain = torch.log_softmax(hidden @ weight.t() / 0.7, -1).gather(1, targets[:, None]).squeeze(1)
    grads = torch.autograd.grad((plain * upstream).sum(), (hidden, weight))
    fused = logprob_head.chunked_logprobs(hidden, weight, targets, 0.7)
    fused_grads = torch.autograd.grad((fused * upstream).sum(), (hidden, weight))
    torch.testing.assert_close(fused, plain.float())
    for mine, theirs in zip(fused_grads, grads, strict=True):
        torch.testing.assert_close(mine, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("head", ["fused", "fused-compact"])
@pytest.mark.parametrize("tuning", [["--full"], ["--lora-rank", "4"]], ids=["full", "lora"])
def test_fused_heads_in_the_built_in_trainer_are_counted_exactly(tmp_path, head, tuning):
    out = cli("train", "--out", str(tmp_path / "run"), "--steps", "2", "--logprob-head", head, *tuning, "--beta",
              "0.04", "--mu", "2", "--prompts-per-step", "4", "-G", "4", "--micro-batch", "8", "--completion-len",
              "6", "--no-eval", "--measure-flops", "--json", "--no-progress", check=True)
    s = json.loads(out.stdout)
    for unit, values in s["measured_by_unit"].items():
        assert values["measured"] == values["closed_form"] > 0, unit
