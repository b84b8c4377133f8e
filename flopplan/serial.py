"""Dataclasses <-> JSON data, strictly: the one converter behind every versioned file flopplan writes (plan file,
run summary and its records, the ledger's checkpoint state, profile, reward model card, race.json).

:func:`to_data` turns a dataclass into plain JSON values: its fields in declaration order, tuples as lists,
floats finite or refused. :func:`from_data` reads them back into the declared types and refuses anything else
with one line naming the path of the offending value: an unknown key, a missing key (a field with a default may
be left out: files written before the field existed still read), a wrong type, a bool where a number is due, a
non-finite number. Supported field types: ``str``, ``int``, ``float`` (a JSON integer is accepted), ``bool``,
``Any`` (JSON data as it is), ``X | None``, unions of scalars (``str | int | float``), ``tuple[X, ...]``,
``dict[str, X]`` and nested dataclasses. A nested class with its own ``to_data()`` and ``from_data(data, where)``
(a recipe, a budget, a plan entry) is written and read by them.

A field can say more in its metadata (:func:`spec`): its JSON ``key``, ``omit`` (left out while it equals the
default), a ``write``/``read`` pair of its own, a :class:`Check` on its value. A class lists in ``DERIVED`` the
properties written after its fields for readers (a summary's ``within_budget``); reading ignores them.

A file kind is a :class:`Layout`: its version key, written first, and the version this flopplan writes;
:func:`write` and :func:`read` add and check it. Older versions read through the layout's upgrade functions,
keyed by the version they upgrade from (each returns the data of the next version).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flopplan.errors import UserError, is_int, is_number


@dataclass(frozen=True)
class Check:
    """A condition on a field's value after conversion: ``test(value)`` true, else ``path must be <what>``."""

    test: Callable[[Any], bool]
    what: str


NON_NEGATIVE = Check(lambda v: v >= 0, "a number >= 0")
POSITIVE = Check(lambda v: v > 0, "a number > 0")
SHARE = Check(lambda v: 0 <= v <= 1, "a share in [0, 1]")


def spec(*, key: str | None = None, omit: bool = False, write: Callable[[Any], Any] | None = None,
         read: Callable[[Any, str], Any] | None = None, check: Check | None = None) -> dict[str, Any]:
    """Field metadata for the converter (``dataclasses.field(metadata=spec(...))``); ``write`` and ``read`` see
    only values that are not None."""
    return {"serial": {"key": key, "omit": omit, "write": write, "read": read, "check": check}}


_PLAIN: dict[str, Any] = {"key": None, "omit": False, "write": None, "read": None, "check": None}


def _spec(f: dataclasses.Field[Any]) -> dict[str, Any]:
    out: dict[str, Any] = f.metadata.get("serial", _PLAIN)
    return out


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def to_data(obj: Any) -> Any:
    """Plain JSON data of ``obj`` (a dataclass, tuple, dict or scalar); a non-finite float is a UserError."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        data = {}
        for f in dataclasses.fields(obj):
            opts, value = _spec(f), getattr(obj, f.name)
            if opts["omit"] and value == _default(f):
                continue
            data[opts["key"] or f.name] = opts["write"](value) if opts["write"] and value is not None \
                else _nested(value)
        for name in getattr(obj, "DERIVED", ()):
            data[name] = _nested(getattr(obj, name))
        return data
    if isinstance(obj, (tuple, list)):
        return [_nested(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): _nested(v) for k, v in obj.items()}
    if isinstance(obj, np.generic):  # a numpy scalar that slipped through: its Python value
        return to_data(obj.item())
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise UserError(f"cannot write a non-finite number ({obj!r}) to JSON")
        return obj
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    raise UserError(f"cannot write a {type(obj).__name__} to JSON")


def _nested(value: Any) -> Any:
    """A value inside a file: by its own ``to_data`` when its class has one, else as :func:`to_data` writes it."""
    own = getattr(value, "to_data", None)
    return own() if callable(own) and not isinstance(value, type) else to_data(value)


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
    if tp is Any:
        return value
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
        items = [a for a in typing.get_args(tp) if a is not Ellipsis]
        if len(items) > 1:  # a fixed-length tuple, e.g. (step, accuracy, FLOPs)
            if len(value) != len(items):
                raise UserError(f"{path} must be a list of {len(items)}, not {value!r:.60}")
            return tuple(_convert(a, v, f"{path}[{i}]") for i, (a, v) in enumerate(zip(items, value, strict=True)))
        return tuple(_convert(items[0], v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise UserError(f"{path} must be an object, not {value!r:.60}")
        _, item = typing.get_args(tp)
        return {str(k): _convert(item, v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(tp, type) and callable(getattr(tp, "from_data", None)):
        return tp.from_data(value, path)  # type: ignore[attr-defined]
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return from_data(tp, value, path)
    raise UserError(f"{path}: unsupported field type {tp!r}")  # a programming error, said in one line


def from_data(cls: type[Any], data: Any, where: str, *, other_keys: bool = False) -> Any:
    """An instance of the dataclass ``cls`` from ``data``: every field present with its declared type (a field
    with a default may be missing), no other key but the class's ``DERIVED`` (``other_keys``: others are
    ignored); the first problem is a one-line UserError starting with ``where`` and the path."""
    if not isinstance(data, dict):
        raise UserError(f"{where} must be an object, not {data!r:.60}")
    fields = dataclasses.fields(cls)
    keys = {_spec(f)["key"] or f.name: f for f in fields}
    unknown = [] if other_keys else [k for k in data if k not in keys and k not in getattr(cls, "DERIVED", ())]
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r}")
    missing = [k for k, f in keys.items() if k not in data and _default(f) is dataclasses.MISSING]
    if missing:
        raise UserError(f"{where}: missing key {missing[0]!r}")
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for key, f in keys.items():
        if key not in data:
            continue
        opts, value, path = _spec(f), data[key], f"{where}.{key}"
        args = _union_args(hints[f.name])
        if value is None and args is not None and type(None) in args:
            values[f.name] = None
            continue
        value = opts["read"](value, path) if opts["read"] else _convert(hints[f.name], value, path)
        check = opts["check"]
        if check is not None and not check.test(value):
            raise UserError(f"{path} must be {check.what}, not {value!r:.60}")
        values[f.name] = value
    return cls(**values)


# -- versioned files ---------------------------------------------------------------------------------------------

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Layout:
    """One kind of versioned file: ``what`` it is (for messages), its version ``key`` and the ``version`` this
    flopplan writes. ``upgrades[v]`` turns the data of version v into that of v + 1; ``unversioned``: the version
    of data without the key (None: such data is refused). ``hint``: how to make a good file. ``other_keys``: the
    file may hold keys the class does not read (a calibrated profile's diagnostics), ignored."""

    what: str
    key: str
    version: int
    upgrades: Mapping[int, Upgrade] = field(default_factory=dict)
    unversioned: int | None = None
    hint: str = ""
    other_keys: bool = False

    def readable(self) -> list[int]:
        return sorted({*self.upgrades, self.version})


def write(layout: Layout, obj: Any) -> dict[str, Any]:
    """The data of a file of ``layout``: its version key first, then ``obj``'s fields (:func:`to_data`)."""
    return {layout.key: layout.version, **to_data(obj)}


def upgrade(layout: Layout, data: Any, where: str) -> dict[str, Any]:
    """``data`` of any version ``layout`` reads, brought to the current version, without its version key."""
    hint = f"; {layout.hint}" if layout.hint else ""
    if not isinstance(data, dict):
        raise UserError(f"{where} is not a flopplan {layout.what}: not a JSON object{hint}")
    if layout.key not in data and layout.unversioned is None:
        raise UserError(f"{where} is not a flopplan {layout.what}: no {layout.key} (this flopplan reads version "
                        f"{layout.version}{hint})")
    version = data.get(layout.key, layout.unversioned)
    readable = layout.readable()
    if not is_int(version) or version not in readable:
        wanted = f"the integer {layout.version}" if len(readable) == 1 else \
            f"an integer from {readable[0]} to {layout.version}"
        newer = " (written by a newer flopplan?)" if is_int(version) and version > layout.version else ""
        raise UserError(f"{where}: {layout.key} must be {wanted} (the layouts this flopplan reads), "
                        f"not {version!r}{newer}")
    body = {k: v for k, v in data.items() if k != layout.key}
    for old in range(int(version), layout.version):
        body = layout.upgrades[old](body)
    return body


def read(layout: Layout, cls: type[Any], data: Any, where: str) -> Any:
    """An instance of ``cls`` from a file's data of any version ``layout`` reads; one line for a bad file."""
    return from_data(cls, upgrade(layout, data, where), where, other_keys=layout.other_keys)
