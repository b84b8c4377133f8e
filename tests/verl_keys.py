"""verl 0.9.1's default config keys, read from the PyPI wheel without importing verl (tests only).

``obtain_wheel`` downloads ``verl==0.9.1`` with pip (``--no-deps``) into a cache folder once; ``default_keys``
reads ``verl/trainer/config/_generated_ppo_trainer.yaml`` from the zip (verl's own flattened dump of
``ppo_trainer.yaml``, the Hydra defaults lists applied) and flattens it to dotted keys: a leaf is a scalar, a list,
or an empty mapping. This is the set Hydra's compose accepts without ``+`` (less ``model_engine``, a
``@package _global_`` key the dump leaves out and flopplan never sets).
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import yaml

VERL_WHEEL = "verl-0.9.1-py3-none-any.whl"
GENERATED_CONFIG = "verl/trainer/config/_generated_ppo_trainer.yaml"


def obtain_wheel(folder: Path, timeout: float = 300) -> Path:
    """The verl 0.9.1 wheel in ``folder``, downloaded there by pip when missing; raises RuntimeError (with pip's
    last line) when the download fails, e.g. without a network."""
    wheel = folder / VERL_WHEEL
    if wheel.is_file() and zipfile.is_zipfile(wheel):
        return wheel
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "verl==0.9.1",
           "-d", str(folder)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"pip download verl==0.9.1: {exc}") from None
    if done.returncode != 0 or not wheel.is_file():
        lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
        raise RuntimeError(f"pip download verl==0.9.1 failed: {lines[-1]}")
    return wheel


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> leaf value of a nested mapping (lists and empty mappings are leaves)."""
    if not isinstance(node, dict) or not node:
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def generated_config(wheel: Path) -> dict[str, Any]:
    """The nested default config as the wheel ships it (interpolations left as text)."""
    with zipfile.ZipFile(wheel) as archive:
        return yaml.safe_load(archive.read(GENERATED_CONFIG).decode("utf-8"))


def default_keys(wheel: Path) -> dict[str, Any]:
    """Every dotted key of verl's default PPO config with its default as written."""
    return flatten(generated_config(wheel))
