"""Helpers shared by the tests: run the CLI in this process (click's runner, milliseconds) or in a new one (for
what needs a process of its own: the no-torch checks, kills and Ctrl-C), write config files; the mark for tests
that need root; the time model's tiny recipe and profiles."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from flopplan.hardware import Profile
    from flopplan.recipe import Recipe

ROOT = Path(__file__).resolve().parent.parent
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (device nodes, tmpfs mounts)")
TINY = ["plan", "--model", "tiny", "--budget", "1e15"]
"""A plan that takes milliseconds: for tests of where and how a command writes."""
SLOW_FROM_PARAMS = 5 * 10**9
"""Meta-device counts of a model this large (the 7B class and up; its smallest, Qwen2.5-Math-PRM-7B, has 7.1B
parameters) take seconds to tens of seconds each (FlopCounterMode dispatches every op in Python): those cases are
marked slow and run in `make test`, not in `make test-fast`."""


def marked_slow_if_large(params: int, *values: object) -> object:
    """A pytest case of ``values``, marked slow when its model has at least :data:`SLOW_FROM_PARAMS` parameters."""
    return pytest.param(*values, marks=pytest.mark.slow) if params >= SLOW_FROM_PARAMS else pytest.param(*values)


TINY_PARAMS = 10**8
"""Models this small (the trainer's tiny family) cost milliseconds to count: always in the fast tier."""
SIZES = ("name", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads", "head_dim",
         "vocab_size", "max_position_embeddings", "rope_theta", "source")


def structure(spec: Any) -> tuple:
    """What decides which ops an ArchSpec's model runs (so which of flopplan's terms a count exercises): every field
    but the sizes and names (family, biases, tied embeddings, QK-norm, sliding window), the head's kind, the MoE
    block's flags, and whether attention is grouped."""
    flags = tuple((f.name, getattr(spec, f.name)) for f in dataclasses.fields(spec)
                  if f.name not in SIZES and f.name not in ("head", "moe"))
    moe = spec.moe and (spec.moe.top_k > 1, spec.moe.shared_intermediate > 0, spec.moe.shared_gate)
    return (*flags, spec.head.kind, moe, spec.num_kv_heads < spec.num_heads)


def tiered(specs: Iterable[tuple[Any, tuple]]) -> list:
    """pytest cases from ``(spec, values)`` pairs: the large-model rule (:func:`marked_slow_if_large`), and a model
    of a :func:`structure` that a smaller one (not tiny) already counts in the fast tier is marked slow too: the same
    ops at other sizes, which `make test` counts and `make test-fast` counts once."""
    pairs = list(specs)
    smallest: dict[tuple, int] = {}
    for spec, _ in pairs:
        if TINY_PARAMS <= spec.params < SLOW_FROM_PARAMS:
            key = structure(spec)
            smallest[key] = min(smallest.get(key, spec.params), spec.params)
    cases = []
    for spec, values in pairs:
        fast = spec.params < TINY_PARAMS or smallest.get(structure(spec)) == spec.params
        cases.append(marked_slow_if_large(spec.params if fast else SLOW_FROM_PARAMS, *values))
    return cases


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def cli(*args: str, check: bool = False) -> Result:
    """``flopplan ARGS`` in this process; exit code, stdout and stderr as a subprocess would give them."""
    from click.testing import CliRunner

    from flopplan.cli import main

    out = CliRunner().invoke(main, list(args), catch_exceptions=False)
    result = Result(out.exit_code, out.stdout, out.stderr)
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def run(*args: str, timeout: int = 600, check: bool = False) -> subprocess.CompletedProcess:
    """``python -m flopplan ARGS`` in a new process, from the repository root."""
    out = subprocess.run([sys.executable, "-m", "flopplan", *args], capture_output=True, text=True, timeout=timeout,
                         cwd=ROOT)
    if check:
        assert out.returncode == 0, out.stderr[-3000:]
    return out


def one_line_error(result: Result | subprocess.CompletedProcess, fragment: str = "") -> str:
    """Assert the command failed as bad input: exit code 2, one line on stderr (containing ``fragment``)."""
    assert result.returncode == 2, (result.returncode, result.stdout[-1000:], result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("flopplan: "), result.stderr
    assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def kill_group_when(proc: subprocess.Popen, ready: Any, timeout: float = 600) -> None:
    """SIGKILL ``proc`` and its children (its process group: start it with ``start_new_session=True``; and every
    descendant, which a launcher such as torchrun may start in groups of their own) once ``ready()`` holds. They
    are stopped (SIGSTOP) before the check is repeated, so nothing can move on between the check and the kill; the
    call returns when every one is gone."""
    import signal
    import time

    import psutil  # accelerate's dependency

    def send(sig: int) -> list[psutil.Process]:
        family = psutil.Process(proc.pid).children(recursive=True)
        os.killpg(proc.pid, sig)
        for child in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.send_signal(sig)
        return family

    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else "ended"
        assert time.monotonic() < deadline, "the kill point never came"
        if ready():
            send(signal.SIGSTOP)
            if ready():
                break
            send(signal.SIGCONT)
        time.sleep(0.02)
    family = send(signal.SIGKILL)
    proc.wait()
    psutil.wait_procs(family, timeout=60)


def sigint_in_round_2(command: list[str], run: Path, rank: str | None = None) -> tuple[int, str]:
    """Start ``command`` (a metered run writing the run folder ``run``), send SIGINT once round 1's line is logged
    (round 2 has begun: to the process, or to the worker of ``rank`` under torchrun), wait for it to end; its exit
    code and stderr. The timeouts guard against a hang, not a speed."""
    import signal
    import time

    import psutil  # accelerate's dependency

    proc = subprocess.Popen(command, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics, deadline = run / "metrics.jsonl", time.monotonic() + 300
    while not (metrics.is_file() and metrics.read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, "the run ended before its second round"
        time.sleep(0.05)
    target = psutil.Process(proc.pid)
    if rank is not None:
        target = {p.environ().get("RANK"): p for p in target.children(recursive=True)}[rank]
    target.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


def write_config(directory: Path, name: str, cfg: dict) -> Path:
    path = directory / name / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cfg))
    return path


# -- the time model's test world: a tiny recipe, a block of time outside the phases, profiles on the true phases --

def tiny_moe(family: str) -> Any:
    """A tiny MoE policy of ``family`` (qwen3_moe, qwen2_moe, mixtral): two layers, six experts, top-2; Qwen2-MoE
    with a 40-wide shared expert."""
    from flopplan.arch import ArchSpec
    from flopplan.moe import MoE

    shared = family == "qwen2_moe"
    return ArchSpec(name=f"tiny-{family}", family=family, hidden_size=32, intermediate_size=48, num_layers=2,
                    num_heads=4, num_kv_heads=2, head_dim=8, vocab_size=64, tie_embeddings=False,
                    qkv_bias=shared, qk_norm=family == "qwen3_moe",
                    moe=MoE(6, 2, 24, 40 if shared else 0, shared_gate=shared))


def tiny_recipe(**changes: Any) -> Recipe:
    """The tiny policy's recipe the time-model tests start from (8 prompts x G=8, 10 + 2 tokens), with ``changes``."""
    from flopplan.lengths import Length
    from flopplan.recipe import Recipe

    base = {"policy": "tiny", "lora_rank": None, "prompts_per_step": 8, "group_size": 8,
            "prompt_len": Length.fixed(10), "completion_len": Length.fixed(2), "micro_batch": 32,
            "eval_every": 5, "eval_prompts": 40, "eval_completion_len": Length.fixed(2)}
    return Recipe(**{**base, **changes})


OUTSIDE = {"round": {"seconds": 0.05, "seconds_per_rollout": 0.001, "seconds_per_token": 0.0,
                     "seconds_per_scored_rollout": 0.0},
           "optimizer_step": {"seconds": 0.01, "seconds_per_tensor": 0.0, "seconds_per_byte": 0.0},
           "evaluation": {"seconds": 0.2, "seconds_per_prompt": 0.0},
           "checkpoint": {"seconds": 0.5, "seconds_per_byte": 0.0},
           "startup": {"seconds": 7.0, "seconds_per_parameter": 0.0}, "shutdown": {"seconds": 2.0}}
"""A profile's ``non_phase`` block: seconds per round, optimizer step, evaluation, checkpoint, start-up, shut-down."""


def profile_with(**blocks: Any) -> Profile:
    """A profile timed by synthetic_runs' true phase model, with ``blocks`` (non_phase, fitted_shapes, ...) added."""
    from synthetic_runs import TRUE_PHASES

    from flopplan.hardware import profile_from_data

    base = {"flopplan_profile_version": 1, "device": "test", "peak_flops": 1e11,
            "efficiency": dict.fromkeys(("train", "forward", "prefill", "decode"), 0.5),
            "time_model": {k: {kk: vv for kk, vv in v.items()} for k, v in TRUE_PHASES.items()}}
    return profile_from_data({**base, **blocks}, "test profile")


def old_char_tokenizer():
    """flopplan's character tokenizer as it was until December 2026: a WordLevel over the 23 symbols (an unknown
    character read as ``?``), which transformers 5 rebuilds as a Qwen2 tokenizer that drops spaces and newlines
    when a Qwen2 folder holds it."""
    from tokenizers import Regex, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    from flopplan.grpo.tokenizer import CharTokenizer

    core = Tokenizer(WordLevel({t: i for i, t in enumerate(CharTokenizer().vocab)}, unk_token="?"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<eos>", pad_token="<pad>")
