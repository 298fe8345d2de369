"""The emulated servo bus as a process: ``python -m snake_control.dynamixel.simbus [options]``.

Prints the device path on its first stdout line, then serves until SIGINT/SIGTERM, answering
control-channel commands (snake_control.dynamixel.control) from stdin with one JSON line each.
`snake sim-bus` runs the same options; SimBusProcess (snake_control.dynamixel.simproc) starts this
module as a child.

``--physics`` is ``motor`` (the built-in MotorModel) or ``package.module:factory``, a callable
``factory(ids, models_by_id, robot) -> Plant`` that the caller names: this package never imports a
physics engine on its own (the physics package depends on this one, not the other way round).
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
                                               'or MODULE:FACTORY') -> None:
    """The options of the emulated bus (shared with `snake sim-bus`, which names its own plants)."""
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument('--robot', help='robot name or YAML: servo IDs, model and baud from its bus section')
    who.add_argument('--servos', type=int, help='number of servos, IDs 1..N')
    parser.add_argument('--model', default='XM430-W350',
                        help='servo model with --servos (default XM430-W350)')
    parser.add_argument('--baud', type=int, help='bus baud rate (default: the robot YAML, or 1000000)')
    parser.add_argument('--faults', default='', help='fault injection spec (corrupt=, drop=, silent=, trip=, '
                                                     'unplug=, seed=)')
    parser.add_argument('--physics', default=DEFAULT_PHYSICS, help=physics_help)
    parser.add_argument('--link', help='device path to create (default: a fresh temporary directory)')
    parser.add_argument('--firmware', type=int, default=46,
                        help='firmware version the servos report (below 45: no fast sync read, no backup)')
    parser.add_argument('--return-delay', type=int, default=250,
                        help='initial Return Delay Time register, units of 2 us (factory default 250)')
    parser.add_argument('--spread', type=float, default=0.2,
                        help='initial joint angles uniformly within +-SPREAD rad of zero (seeded)')
    parser.add_argument('--seed', type=int, default=0, help='seed for the initial angles')


def plant_factory(physics: str):
    """The plant factory for a ``--physics`` value: None for the built-in motor model, else the callable
    a ``module:factory`` reference names. ValueError naming the option when it does not resolve."""
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


def run(args, out=sys.stdout) -> int:
    """Build the bus from parsed options, print its device path, serve until SIGINT/SIGTERM."""
    from snake_control.dynamixel.emulator import BusEmulator
    from snake_control.dynamixel.faults import FaultSpec
    from snake_control.dynamixel.models import SERVO_MODELS

    rng = random.Random(args.seed)
    faults = FaultSpec.parse(args.faults)
    robot = None
    if args.robot:
        from snake_control.robot import load_robot
        robot = load_robot(args.robot)
        ids = robot.servo_ids
        models = {i: robot.bus.servo for i in ids}
        baud = args.baud or robot.bus.baud
        initial = {j.servo_id: j.servo_angle_rad(rng.uniform(-args.spread, args.spread)) for j in robot.joints}
    else:
        if not 1 <= args.servos <= 252:
            raise ValueError(f'--servos must be 1..252, got {args.servos}')
        if args.model not in SERVO_MODELS:
            raise ValueError(f'--model {args.model!r} unknown; known: {", ".join(SERVO_MODELS)}')
        ids = list(range(1, args.servos + 1))
        models = {i: SERVO_MODELS[args.model] for i in ids}
        baud = args.baud or 1_000_000
        initial = {i: rng.uniform(-args.spread, args.spread) for i in ids}
    factory = plant_factory(args.physics)
    plant = factory(list(ids), models, robot) if factory is not None else None
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
