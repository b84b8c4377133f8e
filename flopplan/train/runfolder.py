"""A run folder on disk: created once (never over another run or someone's files), appended to step by step,
trimmed back to the checkpoint on resume, summarised atomically. The layout is :mod:`flopplan.runfile`'s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flopplan import __version__
from flopplan.errors import UserError
from flopplan.fileio import atomic_write_json, atomic_write_text, read_json, read_step_log, writable_folder
from flopplan.runfile import CONFIG, LEDGER, METRICS, RUN_VERSION, SUMMARY, RunSummary
from flopplan.train.config import TrainConfig

RUN_FILES = frozenset({CONFIG, METRICS, LEDGER, SUMMARY, "report.png", "checkpoints"})


class RunFolder:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def create(self, config: TrainConfig) -> None:
        """A new run folder; an existing one is reused only when it holds nothing but an earlier run's files
        that never reached a checkpoint (a run stopped during its first step)."""
        where = str(self.path)
        if self.path.is_dir():
            if self.checkpoints.is_dir() and any(self.checkpoints.iterdir()):
                raise UserError(f"{where!r} already holds a run: use --resume or another --out")
            others = sorted(p.name for p in self.path.iterdir()
                            if p.name not in RUN_FILES and not p.name.startswith("."))
            if (self.path / CONFIG).exists() and not _is_run_config(self.path / CONFIG):
                others.append(CONFIG)  # e.g. a model folder
            if others:
                raise UserError(f"--out {where!r} holds files that are not a flopplan run "
                                f"({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}): "
                                "use an empty or new folder")
        writable_folder(self.path, "run folder")
        for name in (METRICS, LEDGER):
            atomic_write_text(self.path / name, "")
        self.write_config(config)

    def write_config(self, config: TrainConfig) -> None:
        atomic_write_json(self.path / CONFIG, {"flopplan_version": __version__, "flopplan_run_version": RUN_VERSION,
                                               **config.to_data()})

    def read_config(self) -> TrainConfig:
        path = self.path / CONFIG
        if not path.exists():
            raise UserError(f"nothing to resume in {str(self.path)!r}: no {CONFIG}")
        data = read_json(path, "run config")
        if not isinstance(data, dict) or "recipe" not in data:
            raise UserError(f"{str(path)!r} is not a flopplan run config")
        data.pop("flopplan_version", None)
        data.pop("flopplan_run_version", None)
        try:
            return TrainConfig.from_data(data, repr(str(path)))
        except TypeError as exc:
            raise UserError(f"{str(path)!r} is not a flopplan run config ({exc})") from None

    def append(self, step: int, charges: list[dict[str, Any]], metrics_line: dict[str, Any]) -> None:
        """One step's ledger and metrics lines (each a whole line: a kill leaves at most one cut short)."""
        with open(self.path / LEDGER, "a") as handle:
            handle.write(json.dumps({"step": step, "charges": charges}) + "\n")
        with open(self.path / METRICS, "a") as handle:
            handle.write(json.dumps(metrics_line) + "\n")

    def trim(self, step: int) -> None:
        """Drop log lines of steps after ``step`` (done after the checkpoint, before a crash) and a cut line."""
        for name in (METRICS, LEDGER):
            kept = [line for line in read_step_log(self.path / name) if line["step"] <= step]
            atomic_write_text(self.path / name, "".join(json.dumps(line) + "\n" for line in kept))

    def metrics(self) -> list[dict[str, Any]]:
        return read_step_log(self.path / METRICS)

    def write_summary(self, summary: RunSummary) -> None:
        atomic_write_json(self.path / SUMMARY, summary.to_data())


def _is_run_config(path: Path) -> bool:
    try:
        return "flopplan_version" in json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return False
