"""Hugging Face Hub ids (``ORG/NAME``) to a local ``config.json``, offline first (torch-free).

Order: the local Hugging Face cache in huggingface_hub's layout (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
``~/.cache/huggingface/hub``; ``models--ORG--NAME/snapshots/<commit>/config.json``, the commit named by
``refs/main`` first); then, unless ``HF_HUB_OFFLINE`` is set, a download of config.json alone through
huggingface_hub (when installed), which stores it in that same cache. Otherwise one line says where to put it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from flopplan.errors import UserError

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_TRUE = ("1", "true", "yes", "on")


def is_repo_id(text: str) -> bool:
    """Whether ``text`` has the shape of a Hub id (``ORG/NAME``, nothing else)."""
    return bool(_REPO_ID.match(text)) and not text.endswith(".json")


def cache_dir() -> Path:
    """huggingface_hub's cache folder as its environment variables set it."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def _repo_folder(repo_id: str) -> Path:
    """``repo_id``'s folder in the cache: the one spelt as given, else one that differs from it in case alone.

    The Hub reads repository ids case-insensitively, while huggingface_hub names the cache folder after the id as
    the caller spelt it (huggingface/huggingface_hub#2090), so ``myorg/qwen2.5-0.5b-instruct`` may be cached as
    ``models--myorg--Qwen2.5-0.5B-Instruct``; of several such folders, the first in sorted order."""
    name = f"models--{repo_id.replace('/', '--')}"
    folder = cache_dir() / name
    if folder.is_dir() or not cache_dir().is_dir():
        return folder
    same = sorted(p for p in cache_dir().iterdir() if p.name.lower() == name.lower() and p.is_dir())
    return same[0] if same else folder


def cached_config(repo_id: str) -> Path | None:
    """The cached config.json of ``repo_id``: the snapshot ``refs/main`` names, else any snapshot holding one."""
    folder = _repo_folder(repo_id)
    snapshots = folder / "snapshots"
    ref = folder / "refs" / "main"
    if ref.is_file():
        candidate = snapshots / ref.read_text().strip() / "config.json"
        if candidate.is_file():
            return candidate
    if snapshots.is_dir():
        for candidate in sorted(snapshots.glob("*/config.json")):
            return candidate
    return None


PROBE_SECONDS = 3.0
"""How long to wait for the Hub's host before deciding there is no network (huggingface_hub itself retries a failed
connection with back-off for about 20 s, printing each retry)."""


def reachable(endpoint: str, seconds: float = PROBE_SECONDS) -> bool:
    """Whether a TCP connection to the endpoint's host opens within ``seconds`` (name resolution included)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    if not parts.hostname:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=seconds):
            return True
    except OSError:
        return False


def _download(repo_id: str) -> Path | None:
    """config.json alone through huggingface_hub, into its cache; None when not installed or unreachable (the
    host is probed first, so no network costs a few seconds and prints nothing)."""
    try:
        from huggingface_hub import constants, hf_hub_download
    except ImportError:
        return None
    if not reachable(constants.ENDPOINT):
        return None
    try:
        return Path(hf_hub_download(repo_id, "config.json", cache_dir=str(cache_dir())))
    except Exception:  # unknown or gated repository, a dropped connection: all mean "not here"
        return None


def found_config(repo_id: str) -> Path | None:
    """A local config.json for ``repo_id``: from the cache, else a download (unless offline); else None."""
    found = cached_config(repo_id)
    return _download(repo_id) if found is None and not offline() else found


def config_path(repo_id: str) -> Path:
    """A local config.json for ``repo_id``, from the cache or a download; else one line saying where to put it."""
    found = found_config(repo_id)
    if found is not None:
        return found
    where = cache_dir() / f"models--{repo_id.replace('/', '--')}" / "snapshots" / "main" / "config.json"
    how = "HF_HUB_OFFLINE is set" if offline() else "it could not be downloaded"
    raise UserError(f"model {repo_id!r} is not in the registry, not in the local Hugging Face cache, and {how}: "
                    f"put its config.json at {where} or pass the path of a config.json")
