"""One module per `snake` subcommand; snake_control.cli registers them.

Each module defines HELP (one line), DESCRIPTION (the --help text), add_arguments(parser) and
run(args) -> exit code, and raises CommandError for a user-facing failure.
"""


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit code 2, no traceback."""
