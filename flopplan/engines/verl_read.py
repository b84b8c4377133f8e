"""Reading a verl config for ``plan --from-verl``: the file (Hydra overrides or a YAML config) and its keys, checked
against verl 0.9.1's composed config (:mod:`flopplan.engines.verl_keys`) as Hydra's compose checks them."""

from __future__ import annotations

import shlex
from collections.abc import Collection
from pathlib import Path
from typing import Any

from flopplan.engines.hydra import parse_value
from flopplan.engines.verl_keys import VERL_VERSION, verl_keys, verl_leaves
from flopplan.errors import UserError
from flopplan.fileio import read_text


def read_overrides(path: str | Path) -> dict[str, Any]:
    """A verl config file as dotted key -> value: YAML (``.yaml``/``.yml``: a full config such as a run's
    ``.hydra/config.yaml``), else Hydra overrides, one ``key=value`` a line (``#`` comments, shell quoting). A YAML
    key verl's config lacks is refused, unless it lies under one of verl's leaves (``model.override_config: {}``,
    a null): such a key, which a run added with ``+``, comes back as ``++key`` (set whether or not it exists)."""
    path, text = Path(path), read_text(path, "verl config")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise UserError(f"verl config {path}{where}: not valid YAML: {problem}") from None
        if not isinstance(data, dict):
            raise UserError(f"verl config {path}: the YAML is a {type(data).__name__}, not a mapping of verl's keys")
        return {_yaml_key(key, path): value for key, value in _flatten(data).items()}
    out: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), 1):
        try:
            tokens = shlex.split(line.strip().removesuffix("\\"), comments=True)
        except ValueError as exc:
            raise UserError(f"{path}:{number}: {exc}") from None
        for key, sep, value in (token.partition("=") for token in tokens):
            if not sep or not key:
                shown = f"{key[:80]!r}{' ...' if len(key) > 80 else ''}"  # a whole file on one line stays short
                raise UserError(f"{path}:{number}: not a key=value override: {shown}")
            out[key] = parse_value(value)
    return out


def _yaml_key(key: str, path: Path) -> str:
    if key in verl_keys():
        return key
    parts = key.split(".")
    if any(".".join(parts[:n]) in verl_leaves() for n in range(1, len(parts))):
        return "++" + key
    raise UserError(f"verl config {path}: {key} is not a key of verl {VERL_VERSION}'s config (misspelt?)")


def _flatten(node: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    return {k: v for key, value in node.items() for k, v in (_flatten(value, f"{prefix}{key}.") if isinstance(
        value, dict) and value else {prefix + str(key): value}).items()}


def check_keys(overrides: Collection[str], known: Collection[str] | None = None) -> None:
    """Refuse, as Hydra's compose does, ``key=`` for a key verl's config lacks and ``+key=`` (append) for one it has;
    ``++key=`` (force) always passes. ``known``: verl's keys (default :func:`verl_keys`: every node of the config in
    struct mode, so a key under an empty mapping such as ``model.override_config`` needs ``+`` too)."""
    known = verl_keys() if known is None else known
    for key in overrides:
        plus = len(key) - len(key.lstrip("+"))
        bare = key[plus:]
        if plus > 2 or not bare:
            raise UserError(f"verl would reject this config: {key!r} is not a Hydra override key (Hydra compose)")
        if plus == 1 and bare in known:
            raise UserError(f"verl would reject this config: Could not append to config. An item is already at "
                            f"'{bare}' (Hydra compose: +{bare} adds a key; drop the + to set it, or ++ to force)")
        if plus == 0 and bare not in known:
            raise UserError(f"verl would reject this config: Could not override '{bare}'. To append to your config use "
                            f"+{bare}=... (Hydra compose: {bare} is not a key of verl {VERL_VERSION}'s config)")
