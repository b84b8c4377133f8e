"""Hydra's override grammar, both ways: a ``key=value`` override's value as OmegaConf reads it, and a value written
back as an override verl's ``main_ppo`` reads unchanged (the launch scripts and override files of
:mod:`flopplan.engines.verl`)."""

from __future__ import annotations

import json
import re
from typing import Any

_EXP_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)[eE][+-]?\d+")  # 1e-3: a float to OmegaConf, text to PyYAML


def parse_value(text: str) -> Any:
    """A Hydra override value as OmegaConf reads it: null, true/false, numbers, ``[a,b]`` lists, else text."""
    import yaml

    if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"":  # Hydra's quoting: \ escapes a quote
        quote = re.escape(text[0])
        return re.sub(rf"(\\*)({quote}|$)", lambda m: "\\" * (len(m.group(1)) // 2) + m.group(2), text[1:-1])
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return float(value) if isinstance(value, str) and _EXP_FLOAT.fullmatch(value) else value


def format_override(key: str, value: Any) -> str:
    """``key=value`` in Hydra's override grammar (strings quoted when they would read as something else)."""
    if value is None or isinstance(value, (bool, int, float, list, tuple)):
        text = json.dumps(value, separators=(",", ":")) if not isinstance(value, (list, tuple)) else "[" + ",".join(
            format_override("", v)[1:] for v in value) + "]"
    elif not (re.fullmatch(r"[\w./~:+-]+", text := str(value)) and parse_value(text) == text):
        text = "'" + re.sub(r"(\\*)('|$)", lambda m: m.group(1) * 2 + "\\" * len(m.group(2)) + m.group(2), text) + "'"
    return f"{key}={text}"
