"""The one exception type for bad input: the CLI turns it into one line on stderr and exit code 2."""


class UserError(ValueError):
    """Bad input from the user: unknown model, malformed config or plan, impossible budget, bad sizes."""
