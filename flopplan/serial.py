"""Frozen dataclasses <-> JSON data, strictly: the one converter behind race.json.

:func:`to_data` turns a dataclass into plain JSON values (fields in declaration order, tuples as lists, floats
finite or refused). :func:`from_data` reads them back into the declared types and refuses anything else with one
line naming the path of the offending value: a missing or unknown key, a wrong type, a bool where a number is
due, a non-finite number. Supported field types: ``str``, ``int``, ``float`` (a JSON integer is accepted),
``bool``, ``X | None``, unions of scalars (``str | int | float``), ``tuple[X, ...]``, ``dict[str, X]`` and
nested dataclasses.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any

import numpy as np

from flopplan.errors import UserError, is_int, is_number


def to_data(obj: Any) -> Any:
    """Plain JSON data of ``obj`` (a dataclass, tuple, dict or scalar); a non-finite float is a UserError."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_data(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (tuple, list)):
        return [to_data(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_data(v) for k, v in obj.items()}
    if isinstance(obj, np.generic):  # a numpy scalar that slipped through: its Python value
        return to_data(obj.item())
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise UserError(f"cannot write a non-finite number ({obj!r}) to JSON")
        return obj
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    raise UserError(f"cannot write a {type(obj).__name__} to JSON")


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _union_args(tp: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return None


def _describe(tp: Any) -> str:
    args = _union_args(tp)
    if args is not None:
        return " or ".join(_describe(a) for a in args)
    origin = typing.get_origin(tp)
    if origin is tuple:
        return "a list"
    if origin is dict:
        return "an object"
    if dataclasses.is_dataclass(tp):
        return "an object"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false",
            type(None): "null"}.get(tp, str(tp))


def _convert(tp: Any, value: Any, path: str) -> Any:
    args = _union_args(tp)
    if args is not None:
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:  # X | None: X's own message, with its path
            return _convert(inner[0], value, path)
        for arg in args:  # scalar unions: the first type that accepts the value as it is
            if arg is type(None):
                continue
            if arg is float and is_int(value) and int in args:
                continue  # an integer in a str | int | float union stays an integer
            try:
                return _convert(arg, value, path)
            except UserError:
                continue
        raise UserError(f"{path} must be {_describe(tp)}, not {value!r:.60}")
    if tp is type(None):
        if value is not None:
            raise UserError(f"{path} must be null, not {value!r:.60}")
        return None
    if tp is bool:
        if not isinstance(value, bool):
            raise UserError(f"{path} must be true or false, not {value!r:.60}")
        return value
    if tp is int:
        if not is_int(value):
            raise UserError(f"{path} must be an integer, not {value!r:.60}")
        return int(value)
    if tp is float:
        if not is_number(value):
            raise UserError(f"{path} must be a finite number, not {value!r:.60}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise UserError(f"{path} must be a string, not {value!r:.60}")
        return value
    origin = typing.get_origin(tp)
    if origin is tuple:
        if not isinstance(value, list):
            raise UserError(f"{path} must be a list, not {value!r:.60}")
        (item,) = (a for a in typing.get_args(tp) if a is not Ellipsis)
        return tuple(_convert(item, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise UserError(f"{path} must be an object, not {value!r:.60}")
        _, item = typing.get_args(tp)
        return {str(k): _convert(item, v, f"{path}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return from_data(tp, value, path)
    raise UserError(f"{path}: unsupported field type {tp!r}")  # a programming error, said in one line


def from_data(cls: type[Any], data: Any, where: str) -> Any:
    """An instance of the dataclass ``cls`` from ``data``: every field present with its declared type, no other
    key; the first problem is a one-line UserError starting with ``where`` and the path."""
    if not isinstance(data, dict):
        raise UserError(f"{where} must be an object, not {data!r:.60}")
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields]
    unknown = [k for k in data if k not in names]
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r}")
    missing = [n for n in names if n not in data]
    if missing:
        raise UserError(f"{where}: missing key {missing[0]!r}")
    hints = _hints(cls)
    return cls(**{f.name: _convert(hints[f.name], data[f.name], f"{where}.{f.name}") for f in fields})
