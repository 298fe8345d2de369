"""The `snake` command: one subcommand per module in snake_control/commands.

Each command module defines HELP (one line), DESCRIPTION (the --help text), add_arguments(parser)
and run(args) -> exit code. Modules import their heavy dependencies inside run(), so `snake --help`
stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import sys

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
    'bringup': 'bringup',
}


class CommandError(Exception):
    """A user-facing failure: printed as one line, exit code 2, no traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except (CommandError, FileNotFoundError, ValueError) as exc:
        # Configuration and input errors carry their own file/key/problem text.
        print(f'snake {args.command}: error: {exc}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == '__main__':
    sys.exit(main())
