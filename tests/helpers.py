"""Helpers shared by the tests: run the CLI in this process (click's runner, milliseconds) or in a new one (for
what needs a process of its own: the no-torch checks, kills and Ctrl-C), and write config files."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SLOW_FROM_PARAMS = 5 * 10**9
"""Meta-device counts of a model this large (the 7B class and up; its smallest, Qwen2.5-Math-PRM-7B, has 7.1B
parameters) take seconds to tens of seconds each (FlopCounterMode dispatches every op in Python): those cases are
marked slow and run in `make test`, not in `make test-fast`."""


def marked_slow_if_large(params: int, *values: object) -> object:
    """A pytest case of ``values``, marked slow when its model has at least :data:`SLOW_FROM_PARAMS` parameters."""
    import pytest

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


def write_config(directory: Path, name: str, cfg: dict) -> Path:
    path = directory / name / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cfg))
    return path
