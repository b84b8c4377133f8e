"""Checkpoints of a run: the trainable weights, the optimizer, every random generator, the data position, the
ledger; written atomically, with a ``latest`` pointer, so a kill at any point leaves a readable one."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from flopplan.errors import UserError, first_line
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


CHECKPOINT_GLOB = "step-*.pt"


def save_checkpoint(folder: Path, step: int, state: dict[str, Any], keep: int | None = None) -> Path:
    """``folder/step-000123.pt`` through a temporary file and a rename, then the ``latest`` pointer; only the
    newest ``keep`` checkpoints stay (all with None). A full disk is one line, with no temporary file left."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"step-{step:06d}.pt"
    tmp = path.with_suffix(".pt.tmp")
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:  # torch reports a full disk as a RuntimeError from its zip writer
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write the checkpoint {str(path)!r}: {first_line(exc)}") from None
    atomic_write_text(folder / "latest", path.name + "\n")
    if keep is not None:
        for old in sorted(folder.glob(CHECKPOINT_GLOB))[:-keep]:
            if old != path:
                old.unlink(missing_ok=True)
    return path


def load_latest(folder: Path, where: str) -> tuple[Path, dict[str, Any], list[str]]:
    """The newest readable checkpoint, and notes on any newer one that could not be read (a kill while writing,
    a corrupted file): the run resumes from the newest good one and says so. One clear line when there is none."""
    candidates = sorted(folder.glob(CHECKPOINT_GLOB), reverse=True) if folder.is_dir() else []
    latest = folder / "latest"
    named = latest.read_text().strip() if latest.exists() else ""
    if named and (folder / named).is_file():  # the pointer first, then the others, newest first
        candidates = [folder / named, *[c for c in candidates if c.name != named]]
    notes: list[str] = []
    for path in candidates:
        try:
            return path, torch.load(path, weights_only=False, map_location="cpu"), notes
        except Exception as exc:  # any corruption of the file
            notes.append(f"checkpoint {path.name} cannot be read ({type(exc).__name__}: {first_line(exc)[:120]})")
    if notes:
        raise UserError(f"nothing to resume in {where!r}: no checkpoint can be read ({notes[0]})")
    raise UserError(f"nothing to resume in {where!r}: no checkpoint")


def refuse_changed_data(kept: Any, now: dict[str, str], path: Path) -> None:
    """Refuse a resume on data other than the checkpoint's (``kept``: its digests; None from a checkpoint that
    predates them, which is not checked), naming the parts that changed."""
    if not isinstance(kept, dict):
        return
    changed = [part for part in now if part in kept and kept[part] != now[part]]
    if changed:
        raise UserError(f"the run's data changed since {path.name} ({', '.join(changed)}: the rows the run reads): "
                        "the checkpoint's data position counts the rows it was trained on; restore the data, or "
                        "start a new run")
