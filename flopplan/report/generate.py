"""``flopplan tables``: every committed table under ``tables/``, regenerated from the closed form."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flopplan.fileio import atomic_write_text
from flopplan.report.tables import to_latex, to_markdown

COMMAND = "flopplan tables"


def _peer_files() -> dict[str, str]:
    from flopplan.report.peer_tables import peer_error_tables

    tables = peer_error_tables()
    return {"peer_formulas.md": to_markdown(tables, COMMAND), "peer_formulas.tex": to_latex(tables, COMMAND)}


GENERATORS: list[Callable[[], dict[str, str]]] = [_peer_files]


def all_tables() -> dict[str, str]:
    """File name -> contents, for every table flopplan publishes."""
    files: dict[str, str] = {}
    for generator in GENERATORS:
        files.update(generator())
    return files


def write_tables(directory: str | Path) -> list[Path]:
    return [atomic_write_text(Path(directory) / name, text) for name, text in sorted(all_tables().items())]


def stale_tables(directory: str | Path) -> list[str]:
    """Names of the files under ``directory`` that differ from (or are missing against) a fresh generation."""
    stale = []
    for name, text in sorted(all_tables().items()):
        path = Path(directory) / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(name)
    return stale
