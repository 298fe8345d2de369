"""The emulated servo bus as a process: ``python -m snake_control.dynamixel.simbus [options]``.

Prints the device path on its first stdout line, then serves until SIGINT/SIGTERM, answering
control-channel commands (snake_control.dynamixel.control) from stdin with one JSON line each.
`snake sim-bus` runs the same options; SimBusProcess (snake_control.dynamixel.simproc) starts this
module as a child.

The servos are given explicitly (--servos or --ids, --model, --baud, --initial): a robot YAML is read
by the callers (snake_control.app.sim_bus turns one into these options). ``--physics`` is ``motor``
(the built-in MotorModel) or ``package.module:factory``, a callable ``factory(ids, models_by_id,
physics_arg) -> Plant`` that the caller names: this package never imports a physics engine on its own
(the physics package depends on this one, not the other way round).
"""
from __future__ import annotations

import argparse
import gc
import importlib
import os
import random
import signal
import sys

DEFAULT_PHYSICS = 'motor'


def add_arguments(parser, physics_help: str = 'plant moving the servos: motor (the built-in motor model) '
                                               'or MODULE:FACTORY') -> object:
    """The options of the emulated bus; returns the required group naming the servos (--servos or
    --ids), to which `snake sim-bus` adds --robot."""
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument('--servos', type=int, help='number of servos, IDs 1..N')
    who.add_argument('--ids', help='servo IDs, comma-separated (e.g. 1,2,5)')
    parser.add_argument('--model', default='XM430-W350', help='servo model (default XM430-W350)')
    parser.add_argument('--baud', type=int, help='bus baud rate (default 1000000)')
    parser.add_argument('--initial', default='',
                        help='initial servo angles, ID:RAD,... (rad from the centre tick); others from --spread')
    parser.add_argument('--faults', default='', help='fault injection spec (corrupt=, drop=, silent=, trip=, '
                                                     'unplug=, seed=)')
    parser.add_argument('--physics', default=DEFAULT_PHYSICS, help=physics_help)
    parser.add_argument('--physics-arg', default=None,
                        help='text handed to the plant factory as its third argument (a robot YAML for mujoco)')
    parser.add_argument('--link', help='device path to create (default: a fresh temporary directory)')
    parser.add_argument('--firmware', type=int, default=46,
                        help='firmware version the servos report (below 45: no fast sync read, no backup)')
    parser.add_argument('--return-delay', type=_int_range(0, 254, ' (units of 2 us)'), default=250,
                        help='initial Return Delay Time register, units of 2 us (factory default 250)')
    parser.add_argument('--spread', type=float, default=0.2,
                        help='initial servo angles uniformly within +-SPREAD rad of the centre (seeded)')
    parser.add_argument('--seed', type=int, default=0, help='seed for the initial angles')
    return who


def _int_range(low: int, high: int, unit: str = ''):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'expected an integer, got {text!r}') from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f'must be between {low} and {high}{unit}, got {value}')
        return value
    parse.__name__ = 'integer'
    return parse


def plant_factory(physics: str):
    """The plant factory for a ``--physics`` value: None for the built-in motor model, else the callable
    ``factory(ids, models_by_id, physics_arg) -> Plant`` a ``module:factory`` reference names.
    ValueError naming the option when it does not resolve."""
    if physics == DEFAULT_PHYSICS:
        return None
    module, sep, attr = physics.partition(':')
    if not sep or not module or not attr:
        raise ValueError(f'--physics {physics!r}: expected {DEFAULT_PHYSICS} or MODULE:FACTORY')
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f'--physics {physics!r}: {exc}') from None
    if not callable(factory):
        raise ValueError(f'--physics {physics!r}: {attr} is not callable')
    return factory


def robot_options(robot, baud: int | None = None, spread_rad: float = 0.2, seed: int = 0) -> dict:
    """The servo options for a robot's bus (as attribute names of the parsed arguments): its IDs, servo
    model and baud, and initial servo angles from joint angles uniform within +-spread_rad (through each
    joint's offset and direction). ``robot`` is a snake_control.robot.Robot, read through its attributes."""
    rng = random.Random(seed)
    initial = {j.servo_id: j.servo_angle_rad(rng.uniform(-spread_rad, spread_rad)) for j in robot.joints}
    return {'servos': None, 'ids': ','.join(str(i) for i in robot.servo_ids), 'model': robot.bus.servo.name,
            'baud': baud or robot.bus.baud, 'initial': ','.join(f'{i}:{a:.9g}' for i, a in initial.items())}


def options_to_args(options: dict) -> list[str]:
    """Command-line options for a dict of option values (None: left out)."""
    args = []
    for name, value in options.items():
        if value is not None:
            args += [f'--{name.replace("_", "-")}', str(value)]
    return args


def robot_args(robot, baud: int | None = None, spread_rad: float = 0.2, seed: int = 0) -> list[str]:
    """Command-line options for a robot's bus (for SimBusProcess); see robot_options."""
    return options_to_args(robot_options(robot, baud, spread_rad, seed))


def _ids(args) -> list[int]:
    if args.servos is not None:
        if not 1 <= args.servos <= 252:
            raise ValueError(f'--servos must be 1..252, got {args.servos}')
        return list(range(1, args.servos + 1))
    try:
        ids = [int(word) for word in args.ids.split(',') if word.strip()]
    except ValueError:
        raise ValueError(f'--ids {args.ids!r}: expected comma-separated integers') from None
    bad = [i for i in ids if not 0 <= i <= 252]
    if not ids or bad or len(set(ids)) != len(ids):
        raise ValueError(f'--ids {args.ids!r}: expected distinct IDs 0..252')
    return ids


def _initial(text: str, ids: list[int], spread: float, seed: int) -> dict[int, float]:
    rng = random.Random(seed)
    out = {i: rng.uniform(-spread, spread) for i in ids}
    for item in filter(None, (w.strip() for w in text.split(','))):
        sid, sep, rad = item.partition(':')
        try:
            if not sep or int(sid) not in out:
                raise ValueError
            out[int(sid)] = float(rad)
        except ValueError:
            raise ValueError(f'--initial item {item!r}: expected ID:RAD with an ID on the bus') from None
    return out


def run(args, out=sys.stdout) -> int:
    """Build the bus from parsed options, print its device path, serve until SIGINT/SIGTERM."""
    from snake_control.dynamixel.emulator import BusEmulator
    from snake_control.dynamixel.faults import FaultSpec
    from snake_control.dynamixel.models import SERVO_MODELS

    faults = FaultSpec.parse(args.faults)
    ids = _ids(args)
    if args.model not in SERVO_MODELS:
        raise ValueError(f'--model {args.model!r} unknown; known: {", ".join(SERVO_MODELS)}')
    models = {i: SERVO_MODELS[args.model] for i in ids}
    baud = args.baud or 1_000_000
    initial = _initial(args.initial, ids, args.spread, args.seed)
    factory = plant_factory(args.physics)
    plant = factory(list(ids), models, args.physics_arg) if factory is not None else None
    bus = BusEmulator(ids, models, baud, faults, plant, args.link, args.firmware, args.return_delay, initial)

    def stop(signum, frame):
        bus.stop_requested = True
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    # Replies are timed to the microsecond: no cycle-collector pauses (the emulator makes no cycles).
    gc.collect()
    gc.freeze()
    gc.disable()
    out.write(bus.path + '\n')
    out.flush()
    print(f'sim-bus: {len(bus.servos)} servo(s) at {baud} baud on {bus.path} -> {os.ttyname(bus.slave)}; '
          f'Ctrl-C to stop', file=sys.stderr, flush=True)
    try:
        bus.serve_forever(sys.stdin if not sys.stdin.isatty() else None, out)
    finally:
        bus.close()
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog='python -m snake_control.dynamixel.simbus',
                                     description='emulated Dynamixel bus behind a pseudo-terminal')
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except ValueError as exc:
        print(f'sim-bus: {exc}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
