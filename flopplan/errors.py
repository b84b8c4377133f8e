"""The one exception type for bad input: the CLI turns it into one line on stderr and exit code 2."""


class UserError(ValueError):
    """Bad input from the user: unknown model, malformed config or plan, impossible budget, bad sizes."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (library errors can span a page), or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
