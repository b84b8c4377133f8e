"""Atomic, versioned files: a reader never sees a half-written plan, ledger, profile or table; and the lock that
gives a run folder one writer.

What the atomic writer does with what is already there:

* nothing, or a regular file: replaced through a temporary file in the same folder and a rename (the old file or
  the new one, never half of one), keeping the old file's permission bits;
* a symbolic link: written *through*: the file it points to is replaced (the link stays a link), with the same
  rules for what it points to; a link into a folder that does not exist is refused (no folder is made for it);
* anything else (a directory, a device such as /dev/null or /dev/full, a FIFO, a socket): refused with one line,
  never replaced by a regular file.

``-`` as a path means standard output, for the commands whose ``--out`` and ``--save-recipe`` accept it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flopplan.errors import UserError

STDOUT = "-"


_NOTHING_THERE = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)  # what Path.exists() reads as "nothing"


def path_kind(path: str | Path, what: str = "") -> str | None:
    """What a path the user gave names, following links: ``"file"`` (a regular file), ``"folder"``, ``"other"`` (a
    FIFO, a device, a socket) or None when nothing is there (as :meth:`Path.exists` reads it). Every other failure
    to look (a name longer than the system allows, a folder that cannot be searched, a NUL in the name) is a
    one-line :class:`UserError`, "cannot read PATH: reason", where Path.exists() and is_file() raise."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno in _NOTHING_THERE:
            return None
        raise UserError(f"cannot read {what}{str(path)!r}: {exc.strerror or exc}") from None
    except ValueError as exc:  # "embedded null byte"
        raise UserError(f"cannot read {what}{str(path)!r}: {exc}") from None
    return "file" if stat.S_ISREG(mode) else "folder" if stat.S_ISDIR(mode) else "other"


def exists(path: str | Path, what: str = "") -> bool:
    """:meth:`Path.exists` for a path the user gave: see :func:`path_kind`."""
    return path_kind(path, what) is not None


def is_file(path: str | Path, what: str = "") -> bool:
    """:meth:`Path.is_file` for a path the user gave: see :func:`path_kind`."""
    return path_kind(path, what) == "file"


def is_dir(path: str | Path, what: str = "") -> bool:
    """:meth:`Path.is_dir` for a path the user gave: see :func:`path_kind`."""
    return path_kind(path, what) == "folder"


def _kind_of(mode: int) -> str:
    return ("a directory" if stat.S_ISDIR(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def writable_target(path: str | Path, what: str = "") -> Path:
    """The file a write to ``path`` replaces: ``path`` itself, or what a symbolic link points to. Refuses (one line)
    a path that exists and is not a regular file, or one that cannot be looked at (a name too long), and a name
    that ends in a slash (``--out plans/`` wrote a file named ``plans``: Path drops the slash)."""
    if isinstance(path, str) and path.endswith(("/", os.sep)):
        raise UserError(f"will not write {what}{path!r}: it names a folder (it ends in a slash); give a file name")
    path = Path(path)
    try:
        target = Path(os.path.realpath(path)) if path.is_symlink() else path
        mode = target.stat().st_mode
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise UserError(f"cannot write {what}{str(path)!r}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise UserError(f"will not write {str(path)!r}: it is {_kind_of(mode)}, not a regular file")
    return target


def writable_targets(*paths: str | Path, reads: tuple[str | Path, ...] = ()) -> None:
    """The files one command writes, each checked by :func:`writable_target` before the first is written (a refusal
    of the third left the first two written: the folder held a config without its launcher), no two the same file
    (``--out plan.json --save-recipe plan.json`` kept only the last), and none of the files it ``reads`` (``plan
    --from-trl X --out X`` replaced the TRL config with the plan). ``-`` (standard output) is left out."""
    inputs = {os.path.realpath(p): str(p) for p in reads if str(p) != STDOUT}
    seen: dict[str, str] = {}
    for path in (p for p in paths if str(p) != STDOUT):
        if (read := inputs.get(os.path.realpath(path))) is not None:
            raise UserError(f"will not write {str(path)!r}: the command reads it ({read!r})")
        key = os.path.realpath(writable_target(path))
        if key in seen:
            raise UserError(f"will not write {seen[key]!r} and {str(path)!r}: they are the same file")
        seen[key] = str(path)


def _make_folder(given: Path, target: Path) -> None:
    """The folder a write to ``given`` needs: ``given``'s own is made; when ``given`` is a link, the folder of what
    it points to (``target``) must already exist. A link into a missing folder writes nowhere, as open() would,
    and makes no folder at its far end."""
    given.parent.mkdir(parents=True, exist_ok=True)
    if not target.parent.is_dir():
        raise UserError(f"cannot write {str(given)!r}: it is a link to {str(target)!r}, whose folder does not exist")


TEMPORARY = ".*.tmp"
"""The name pattern of what a kill during :func:`atomic_write_text` leaves beside its file (never read; a copy of a
folder leaves it out)."""
_TEMPORARY_NAME = re.compile(r"\.(?P<file>.+)\.[a-z0-9_]{8}\.tmp")
"""A temporary's name exactly: ``.FILE.`` + :func:`tempfile.mkstemp`'s 8 random characters + ``.tmp``."""


def temporary_of(name: str) -> str | None:
    """The name of the file whose :func:`atomic_write_text` temporary ``name`` is (what a kill during the write
    leaves: ``.progress.jsonl.k3x_9q0a.tmp`` is progress.jsonl's), or None when ``name`` is no such temporary."""
    match = _TEMPORARY_NAME.fullmatch(name)
    return match["file"] if match else None


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and an atomic rename (see the module
    docstring for links and special files); ``-`` writes to standard output."""
    if str(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return Path(STDOUT)
    given, path = Path(path), writable_target(path)
    try:
        _make_folder(given, path)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # see temporary_of
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
    svg); one-line UserError when it cannot be written. Links and special files as :func:`atomic_write_text`."""
    if str(path) == STDOUT:
        raise UserError("a plot cannot go to standard output: give a file name")
    out = writable_target(path, "the plot ")
    tmp = out.with_name(f".{out.stem}.tmp{out.suffix or '.png'}")
    try:
        _make_folder(Path(path), out)
        fig.savefig(tmp, dpi=dpi)
        tmp.replace(out)
    except OSError as exc:
        raise UserError(f"cannot write the plot {str(out)!r}: {exc.strerror or exc}") from None
    except ValueError as exc:  # a suffix matplotlib has no writer for
        raise UserError(f"cannot write the plot {str(out)!r}: {exc}") from None
    finally:
        with contextlib.suppress(OSError):  # a read-only folder has no temporary to remove
            tmp.unlink(missing_ok=True)
    return out


@contextlib.contextmanager
def folder_lock(folder: str | Path, what: str) -> Iterator[Path]:
    """Hold ``folder/.lock`` for the life of the block (and of the process: the kernel releases an flock when its
    process ends, however it ends, so a lock left by a killed process is no lock). A second holder is refused
    with one line naming the process that holds it."""
    folder = writable_folder(folder, what)
    path = folder / ".lock"
    handle = open(path, "a+")  # noqa: SIM115  (held until the block ends)
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise UserError(f"{what} {str(folder)!r} is in use by {holder}: one writer at a time") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"process {os.getpid()}\n")
        handle.flush()
        yield folder
    finally:
        handle.close()


def lock_holder_pid(folder: str | Path) -> int | None:
    """The process id of the live holder of ``folder``'s :func:`folder_lock` (which writes ``process N``), or None."""
    holder = lock_holder(folder)
    words = holder.split() if holder is not None else []
    return int(words[1]) if len(words) == 2 and words[0] == "process" and words[1].isdigit() else None


def proc_stat(pid: int | str = "self") -> list[str] | None:
    """A process's status fields on Linux (/proc/PID/stat, proc(5)) from its state on: field 3 is item 0, the
    parent's id (field 4) item 1, the start time in clock ticks (field 22) item 19; None when it cannot be read (no
    such process, not Linux). The command name before them is cut at its last ")", as it may hold spaces and ")"."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def lock_holder(folder: str | Path) -> str | None:
    """Who holds ``folder``'s :func:`folder_lock` (``process N``), or None when no live process does."""
    path = Path(folder) / ".lock"
    if not path.is_file():
        return None
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            return handle.read().strip() or "another process"
    return None


SCRATCH_GRACE = 60.0
"""Seconds a scratch folder of another process may stand unlocked: the moment between its creation and its lock."""


def scratch_folder(prefix: str) -> tempfile.TemporaryDirectory[str]:
    """A temporary folder for this process, locked while it lives (removed on cleanup, collection or exit), after
    removing the folders of ``prefix`` that processes killed before their cleanup left: this user's, older than
    :data:`SCRATCH_GRACE`, holding a lock file that no process holds (a lock dies with its process). A folder with
    no lock file stays: an earlier flopplan's, whose process may still run."""
    base = Path(tempfile.gettempdir())
    for old in base.glob(f"{prefix}*"):
        with contextlib.suppress(OSError):
            info = old.lstat()
            if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and \
                    time.time() - info.st_mtime > SCRATCH_GRACE and (old / ".lock").is_file() and \
                    lock_holder(old) is None:
                shutil.rmtree(old)
    scratch = tempfile.TemporaryDirectory(prefix=prefix)
    lock = contextlib.ExitStack()  # held as long as the folder (its object), released with the process
    lock.enter_context(folder_lock(scratch.name, "scratch folder"))
    scratch.lock = lock  # type: ignore[attr-defined]
    return scratch


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
    """The UTF-8 text of a file (a byte-order mark, as some editors write, is dropped); unreadable or undecodable
    files are a one-line :class:`UserError`."""
    path = Path(path)
    # a FIFO or a device is refused before it is opened: opening a FIFO waits for a writer, forever
    if path_kind(path, f"{what} ") == "other":
        raise UserError(f"cannot read {what} {str(path)!r}: it is {_kind_of(os.stat(path).st_mode)}, not a "
                        "regular file")
    try:
        return path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise UserError(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{what} {str(path)!r} is not UTF-8 text (byte {exc.start})") from None


def read_step_log(path: str | Path) -> list[dict[str, Any]]:
    """The records of a run's JSONL log (metrics.jsonl, ledger.jsonl, evaluations.jsonl): JSON objects with an
    integer ``step``; a missing file has no records. The last line may be cut short by a kill (the writers append
    one line at a time, and a resumed run trims such a line first): it is dropped. A line that is not a record with
    more lines after it is damage no kill leaves: a one-line :class:`UserError`, never a silent gap in the run's
    history."""
    path = Path(path)
    if not path.exists():
        return []
    records = []
    lines = [(n, line) for n, line in enumerate(read_text(path, "run log").splitlines(), 1) if line.strip()]
    for i, (n, line) in enumerate(lines):
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            item = None
        if isinstance(item, dict) and isinstance(item.get("step"), int) and not isinstance(item["step"], bool):
            records.append(item)
        elif i < len(lines) - 1:
            raise UserError(f"run log {str(path)!r} is damaged at line {n} (not a JSON record with an integer step, "
                            "and lines follow it: a kill cuts only the last line): restore the file or rerun the "
                            "run")
    return records


def json_error_place(exc: json.JSONDecodeError) -> str:
    """json's message with where it happened: some of its messages end in "at" (``Unterminated string starting
    at``, ``Invalid control character at``) and take the place directly."""
    place = f"line {exc.lineno}, column {exc.colno}"
    return f"{exc.msg} {place}" if exc.msg.endswith(" at") else f"{exc.msg} at {place}"


def read_json(path: str | Path, what: str) -> Any:
    """Read a JSON file flopplan or the user wrote; any problem is a one-line :class:`UserError`."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{what} {str(path)!r} is not valid JSON: {json_error_place(exc)}") from None
    except RecursionError:  # arrays or objects nested deeper than Python's recursion limit (no file of ours)
        raise UserError(f"{what} {str(path)!r} nests its JSON too deeply to read") from None
