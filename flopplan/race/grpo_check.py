"""A GRPOConfig-only axis's values (``race design --axis top_p=0.9,1.0``) checked when the race is designed, not when
a pilot of that arm starts and TRL refuses it after the other arms have spent their budget.

Each value must be of the field's type as the installed TRL annotates it (``float``, ``int``, ``bool``, ``str``,
an enum of strings, ``X | None``, a union of those; a list or dict field cannot take a scalar axis value), and
``GRPOConfig`` built with it must pass TRL's own checks (``__post_init__``: an ``optim`` or ``lr_scheduler_type`` it
does not know, say). What TRL checks only when the trainer starts is not caught: TRL 1.16 builds a config with
``loss_type="foo"``, ``importance_sampling_level="foo"``, ``top_p=2`` or ``top_k=-5``, and the pilot refuses it.
The config is built on the CPU with the fields the race sets
itself (``output_dir`` in a temporary folder, ``report_to="none"``, no bf16), and only when that config without
the axis builds: a check that cannot be made says nothing. Without TRL installed (a design written where the
pilots will not run) nothing is checked; the pilots' TRL, when it is another release, decides in the end.
"""

from __future__ import annotations

import enum
import importlib.util
import tempfile
import types
import typing
import warnings
from typing import Any

from flopplan.errors import UserError


def _fits(value: Any, hint: Any) -> bool:
    """Whether a scalar axis value (a JSON number, bool or text) can be a field annotated ``hint``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return value in {member.value for member in hint}
    # a list or dict field cannot take a scalar; any other type this check does not read: TRL's own checks decide
    return not (hint in (list, dict, tuple) or origin in (list, dict, tuple))


def check_grpo_values(field: str, values: tuple[Any, ...]) -> None:
    """Raise one line when the installed TRL's GRPOConfig cannot take one of ``values`` for ``field`` (module
    docstring); nothing when TRL is not installed."""
    from flopplan.race.script import check_warmup

    for value in values:  # a share of max_steps, which a pilot sets to 10^7 (whatever TRL is installed)
        try:
            check_warmup({field: value})
        except UserError as exc:
            raise UserError(f"--axis {field}={value}: {exc}") from None
    if importlib.util.find_spec("trl") is None:
        return
    from trl import GRPOConfig

    hint = typing.get_type_hints(GRPOConfig).get(field)
    for value in values:
        if hint is not None and not _fits(value, hint):
            shown = getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
            raise UserError(f"--axis {field}={value}: GRPOConfig's {field} is {shown}, not {type(value).__name__}")
    with tempfile.TemporaryDirectory(prefix="flopplan-grpo-check-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' deprecation notes on the defaults are not the user's axis
        own = {"output_dir": tmp, "use_cpu": True, "report_to": "none", "bf16": False}
        try:
            GRPOConfig(**own)
        except Exception:  # the config the race would build does not build here: no check
            return
        for value in values:
            try:
                GRPOConfig(**own, **{field: value})
            except Exception as exc:  # TRL's own refusal, whatever its type, is one line
                message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise UserError(f"--axis {field}={value}: TRL's GRPOConfig refuses it: {message}") from None
