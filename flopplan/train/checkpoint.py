"""Checkpoints of a run: the trainable weights, the optimizer, every random generator, the data position, the
ledger; written atomically, with a ``latest`` pointer, so a kill at any point leaves a readable one."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from flopplan.errors import UserError
from flopplan.fileio import atomic_write_text


def rng_state() -> dict[str, Any]:
    """The state of every generator a step draws from (Python, numpy, torch CPU and CUDA)."""
    state: dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state(),
                             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch: a run is a process of its own (RACE runs pilots as separate processes)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def trainable_state(model: Any) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone().cpu() for k, v in model.named_parameters() if v.requires_grad}


def load_trainable_state(model: Any, state: dict[str, torch.Tensor]) -> None:
    params = dict(model.named_parameters())
    with torch.no_grad():
        for key, value in state.items():
            params[key].copy_(value.to(params[key].device))


def save_checkpoint(folder: Path, step: int, state: dict[str, Any]) -> Path:
    """``folder/step-000123.pt`` through a temporary file and a rename, then the ``latest`` pointer."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"step-{step:06d}.pt"
    tmp = path.with_suffix(".pt.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    atomic_write_text(folder / "latest", path.name + "\n")
    return path


def load_latest(folder: Path, where: str) -> tuple[Path, dict[str, Any]]:
    """The newest checkpoint named by ``latest``; one clear line when there is none or it cannot be read."""
    latest = folder / "latest"
    name = latest.read_text().strip() if latest.exists() else ""
    if not name or not (folder / name).is_file():
        raise UserError(f"nothing to resume in {where!r}: no checkpoint")
    try:
        return folder / name, torch.load(folder / name, weights_only=False, map_location="cpu")
    except Exception as exc:  # any corruption of the file: one clear line, not a traceback
        raise UserError(f"checkpoint {str(folder / name)!r} cannot be read ({type(exc).__name__}: {exc})") from None
