"""The `snake` command: one subcommand per module in snake_control/commands.

Each command module defines HELP (one line), DESCRIPTION (the --help text), add_arguments(parser)
and run(args) -> exit code. Modules import their heavy dependencies inside run(), so `snake --help`
stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from snake_control.commands import CommandError

EXIT_BROKEN_PIPE = 141          # 128 + SIGPIPE, what a shell reports for a writer whose reader left

# Subcommand name -> module under snake_control.commands. Order is the order in `snake --help`.
COMMANDS = {
    'demo': 'demo',
    'urdf': 'urdf',
    'gait': 'gait',
    'torques': 'torques',
    'sim-bus': 'sim_bus',
    'dxl': 'dxl',
    'odometry': 'odometry',
    'connection-plot': 'connection_plot',
    'validate': 'validate',
    'calibrate': 'calibrate',
    'bringup': 'bringup',
    'render': 'render',
}


class _UsageError(Exception):
    """A command line argparse refused; its text is the whole one-line message."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad option is one line naming it (no usage block) and main() returns 2."""

    def error(self, message):
        raise _UsageError(f'{self.prog}: error: {message} (see {self.prog} --help)')


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog='snake',
        description='snake_control: gaits, a Dynamixel driver, a simulated servo bus and a state '
                    'estimator for snake robots. Run `snake COMMAND --help` for each command.')
    sub = parser.add_subparsers(dest='command', metavar='COMMAND', required=True)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f'snake_control.commands.{module_name}')
        p = sub.add_parser(name, help=module.HELP, description=module.DESCRIPTION,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        code = int(args._run(args) or 0)
        sys.stdout.flush()          # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        # `snake ... | head`: the reader has gone. Stop quietly; stdout goes to devnull so the
        # interpreter's final flush cannot fail again.
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE
    except (CommandError, FileNotFoundError, ValueError) as exc:
        # Configuration and input errors carry their own file/key/problem text.
        print(f'snake {args.command}: error: {exc}', file=sys.stderr)
        return 2
    except OSError as exc:
        # A path that is a directory, unreadable or on a full disk: the OS names the file.
        where = f': {exc.filename}' if exc.filename else ''
        print(f'snake {args.command}: error: {exc.strerror or exc}{where}', file=sys.stderr)
        return 2
    except RecursionError:
        print(f'snake {args.command}: error: an input nests too deeply to read', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _stdout_to_devnull() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):    # stdout replaced by something without a descriptor
        pass


if __name__ == '__main__':
    sys.exit(main())
