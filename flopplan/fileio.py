"""Atomic, versioned files: a reader never sees a half-written plan, ledger, profile or table."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from flopplan.errors import UserError


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and an atomic rename."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise UserError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _mode_for(path))  # mkstemp creates 0600; the file gets the mode a plain open would give
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise UserError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
        raise
    return path


def _mode_for(path: Path) -> int:
    """The permission bits of the file being replaced, or 0666 less the umask for a new file."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def atomic_savefig(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """Save a matplotlib figure through a temporary file and a rename (the suffix picks the format: png, pdf,
    svg); one-line UserError when it cannot be written."""
    out = Path(path)
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix or '.png'}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(tmp, dpi=dpi)
        tmp.replace(out)
    except OSError as exc:
        raise UserError(f"cannot write the plot {str(out)!r}: {exc.strerror or exc}") from None
    except ValueError as exc:  # a suffix matplotlib has no writer for
        raise UserError(f"cannot write the plot {str(out)!r}: {exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return out


def writable_folder(folder: str | Path, what: str = "folder") -> Path:
    """Create ``folder`` (and its parents) and make sure files can be written in it, or one-line UserError."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise UserError(f"cannot write the {what} {str(folder)!r}: {exc.strerror or exc}") from None
    return folder


def atomic_write_json(path: str | Path, data: Any) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of a file; unreadable or undecodable files are a one-line :class:`UserError`."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} {str(path)!r} is not UTF-8 text (byte {exc.start})") from None


def read_step_log(path: str | Path) -> list[dict[str, Any]]:
    """The records of a run's JSONL log (metrics.jsonl, ledger.jsonl): JSON objects with an integer ``step``. A
    line that is not one (cut short by a kill) is dropped; a missing file has no records."""
    path = Path(path)
    if not path.exists():
        return []
    records = []
    for line in read_text(path, "run log").splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict) and isinstance(item.get("step"), int) and not isinstance(item["step"], bool):
            records.append(item)
    return records


def read_json(path: str | Path, what: str) -> Any:
    """Read a JSON file flopplan or the user wrote; any problem is a one-line :class:`UserError`."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{what} {str(path)!r} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
