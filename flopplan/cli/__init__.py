"""The ``flopplan`` command line: parses, calls the API, renders. One module per command group; bad input ->
one line on stderr and exit code 2, a run the user interrupted one line and exit code 130, never a traceback."""

from __future__ import annotations

import json
import shlex
import sys
import warnings
from typing import Any, NoReturn

import click

from flopplan import __version__
from flopplan.errors import Interrupted, Note, UserError

EXIT_BAD_INPUT = 2


def fail(message: str) -> NoReturn:
    raise UserError(message)


TEXT_MAY_BE_EMPTY = frozenset({"--system-prompt"})  # an empty system message is still a message


class FlopplanCommand(click.Command):
    """A command that refuses an explicitly given empty name, path or text (``--out ''``, ``--from-verl ''``): it
    names nothing, and read as false it silently became "not given" (a default recipe, nothing written)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rest = super().parse_args(ctx, args)
        for param in self.params:
            given = ctx.get_parameter_source(param.name or "") in (click.core.ParameterSource.COMMANDLINE,
                                                                   click.core.ParameterSource.ENVIRONMENT)
            value = ctx.params.get(param.name or "")
            if given and isinstance(param.type, (click.types.StringParamType, click.Path)) and \
                    "" in (value if isinstance(value, tuple) else (value,)) and param.opts[0] not in TEXT_MAY_BE_EMPTY:
                name = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
                raise UserError(f"{name}: an empty value names nothing (leave the option out for its default)")
        return rest


class FlopplanGroup(click.Group):
    """A click group whose errors are one line on stderr and exit code 2, never a traceback; its commands and
    groups refuse an empty value given to a name or path (:class:`FlopplanCommand`)."""

    command_class = FlopplanCommand
    group_class = type

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        for stream in (sys.stdout, sys.stderr):  # a name the terminal's encoding cannot show is escaped, not fatal
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors="backslashreplace")
        try:
            with warnings.catch_warnings():  # a Note is one line on stderr, once per command
                warnings.simplefilter("default", Note)
                warnings.showwarning = _note_line(warnings.showwarning)
                return super().main(args=args, prog_name=prog_name, complete_var=complete_var,
                                    standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("flopplan: aborted", err=True)
            sys.exit(130)
        except click.ClickException as exc:
            click.echo(f"flopplan: {exc.format_message()}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except Interrupted as exc:
            click.echo(f"flopplan: {exc}", err=True)
            sys.exit(130)
        except UserError as exc:
            click.echo(f"flopplan: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except BrokenPipeError:
            sys.exit(0)
        except OSError as exc:  # the last resort for a path no check looked at first: one line naming it
            where = f" {str(exc.filename)!r}" if exc.filename is not None else ""
            click.echo(f"flopplan: cannot use{where}: {exc.strerror or exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)


def _note_line(show: Any) -> Any:
    """``warnings.showwarning`` that prints a :class:`Note` as one ``flopplan: note:`` line, other warnings as
    ``show`` does."""
    def showwarning(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
                    line: str | None = None) -> None:
        if issubclass(category, Note):
            click.echo(f"flopplan: note: {message}", err=True)
        else:
            show(message, category, filename, lineno, file, line)
    return showwarning


def echo_json(data: Any) -> None:
    try:
        text = json.dumps(data, indent=2, allow_nan=False)
    except ValueError:
        fail("the result holds a non-finite number (inf or nan), which JSON cannot carry")
    click.echo(text)


def command_line() -> str:
    """The command as the user typed it, for the provenance lines of files and tables."""
    return "flopplan " + " ".join(shlex.quote(a) for a in sys.argv[1:])


@click.group(cls=FlopplanGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="flopplan")
def main() -> None:
    """flopplan: where RL post-training compute goes.

    Exact FLOP counts for Qwen2.5 and any Hugging Face decoder; GRPO budgets split into rollout/search,
    learning and feedback.
    """


from flopplan.cli import calibrate, engines, estimate, plan, race, reward_model, train  # noqa: E402  (each registers)

__all__ = ["calibrate", "echo_json", "engines", "estimate", "fail", "main", "plan", "race", "reward_model", "train"]
