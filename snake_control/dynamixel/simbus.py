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
import time

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
    parser.add_argument('--faults', default='', help='fault injection spec (corrupt=, drop=, late=, silent=, '
                                                     'trip=, unplug=, seed=)')
    parser.add_argument('--physics', default=DEFAULT_PHYSICS, help=physics_help)
    parser.add_argument('--physics-arg', default=None,
                        help='text handed to the plant factory as its third argument (a robot YAML for mujoco)')
    parser.add_argument('--physics-in-process', action='store_true',
                        help='step a MODULE:FACTORY plant in this process (default: in a process of its own, '
                             'so that physics never delays a reply)')
    parser.add_argument('--bus-ids', action='append', metavar='IDS[@BAUD]',
                        help='several buses in one process (one pty each, one plant for all): the IDs of '
                             'one bus, comma-separated, optionally @BAUD; repeat per bus; together the '
                             'servos of --ids')
    parser.add_argument('--link', help='device path to create (default: a fresh temporary directory); with '
                                       '--bus-ids, one per bus, comma-separated')
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


def plant_reference(physics: str) -> tuple[str, str]:
    """(module, attribute) of a ``--physics`` MODULE:FACTORY value; ValueError naming the option when it
    has not that form."""
    module, sep, attr = physics.partition(':')
    if not sep or not module or not attr:
        raise ValueError(f'--physics {physics!r}: expected {DEFAULT_PHYSICS} or MODULE:FACTORY')
    return module, attr


def plant_factory(physics: str):
    """The plant factory for a ``--physics`` value: None for the built-in motor model, else the callable
    ``factory(ids, models_by_id, physics_arg) -> Plant`` a ``module:factory`` reference names.
    ValueError naming the option when it does not resolve."""
    if physics == DEFAULT_PHYSICS:
        return None
    module, attr = plant_reference(physics)
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
    options = {'servos': None, 'ids': ','.join(str(i) for i in robot.servo_ids), 'model': robot.bus.servo.name,
               'baud': baud or robot.bus.baud, 'initial': ','.join(f'{i}:{a:.9g}' for i, a in initial.items())}
    lines = getattr(robot, 'bus_lines', ())
    if len(lines) > 1:      # one pty per bus line, one plant for the whole robot
        sid = {j.name: j.servo_id for j in robot.joints}
        options['bus_ids'] = [','.join(str(sid[n]) for n in line.joint_names) + f'@{baud or line.baud}'
                              for line in lines]
    return options


def options_to_args(options: dict) -> list[str]:
    """Command-line options for a dict of option values (None: left out)."""
    args = []
    for name, value in options.items():
        for v in (value if isinstance(value, list) else [value]):     # a list: the option repeated
            if v is not None:
                args += [f'--{name.replace("_", "-")}', str(v)]
    return args


def robot_args(robot, baud: int | None = None, spread_rad: float = 0.2, seed: int = 0) -> list[str]:
    """Command-line options for a robot's buses (for SimBusProcess); see robot_options."""
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


def _bus_groups(args, ids: list[int], baud: int) -> list[tuple[list[int], int]]:
    """(IDs, baud) of each bus: --bus-ids, else one bus with every servo."""
    if not args.bus_ids:
        return [(ids, baud)]
    groups, seen = [], set()
    for text in args.bus_ids:
        id_text, sep, baud_text = text.partition('@')
        try:
            group = [int(w) for w in id_text.split(',') if w.strip()]
            group_baud = int(baud_text) if sep else baud
        except ValueError:
            raise ValueError(f'--bus-ids {text!r}: expected comma-separated IDs, optionally @BAUD') from None
        stray = [i for i in group if i not in ids or i in seen]
        if not group or stray:
            raise ValueError(f'--bus-ids {text!r}: IDs {stray or "none"} not among the servos or on two buses')
        seen.update(group)
        groups.append((group, group_baud))
    left = [i for i in ids if i not in seen]
    if left:
        raise ValueError(f'--bus-ids: servos {left} are on no bus')
    return groups


def run(args, out=sys.stdout) -> int:
    """Build the buses from parsed options, print each device path on a line of its own, serve until
    SIGINT/SIGTERM. Several buses are served in a thread each, with one plant for all their servos."""
    from snake_control.dynamixel.control import command_buses
    from snake_control.dynamixel.emulator import BusEmulator, SharedMechanics
    from snake_control.dynamixel.faults import FaultSpec
    from snake_control.dynamixel.models import SERVO_MODELS

    ids = _ids(args)
    if args.model not in SERVO_MODELS:
        raise ValueError(f'--model {args.model!r} unknown; known: {", ".join(SERVO_MODELS)}')
    models = {i: SERVO_MODELS[args.model] for i in ids}
    baud = args.baud or 1_000_000
    groups = _bus_groups(args, ids, baud)
    links = args.link.split(',') if args.link else [None] * len(groups)
    if len(links) != len(groups):
        raise ValueError(f'--link {args.link!r}: {len(groups)} buses need {len(groups)} paths')
    initial = _initial(args.initial, ids, args.spread, args.seed)
    if args.physics == DEFAULT_PHYSICS:
        plant = None
    elif getattr(args, 'physics_in_process', False):
        plant = plant_factory(args.physics)(list(ids), models, args.physics_arg)
    else:
        # The child imports the factory (and its physics engine): this process never needs them.
        from snake_control.dynamixel.plant_process import ProcessPlant
        plant = ProcessPlant(args.physics, ids, models, args.physics_arg)
    mechanics = SharedMechanics(plant) if len(groups) > 1 else None
    buses = [BusEmulator(group, models, group_baud, FaultSpec.parse(args.faults), plant, link, args.firmware,
                         args.return_delay, initial, mechanics)
             for (group, group_baud), link in zip(groups, links)]

    def stop(signum, frame):
        for b in buses:
            b.stop_requested = True
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    closers = [b.close for b in buses]
    if hasattr(plant, 'start'):
        closers.append(plant.close)         # after the buses: the world answers until they stop
        try:
            plant.start()
        except RuntimeError as exc:
            for close in closers:
                close()
            raise ValueError(str(exc)) from None
    # Replies are timed to the microsecond: no cycle-collector pauses (the emulator makes no cycles).
    gc.collect()
    gc.freeze()
    gc.disable()
    for b in buses:
        out.write(b.path + '\n')
    out.flush()
    for b, (group, group_baud) in zip(buses, groups):
        print(f'sim-bus: {len(b.servos)} servo(s) at {group_baud} baud on {b.path} -> {os.ttyname(b.slave)}'
              f'{"; Ctrl-C to stop" if b is buses[-1] else ""}', file=sys.stderr, flush=True)
    control = sys.stdin if not sys.stdin.isatty() else None
    try:
        if mechanics is None:
            buses[0].serve_forever(control, out)
        else:
            mechanics.start()
            _serve_buses(buses, control, out, command_buses)
    finally:
        if mechanics is not None:
            mechanics.close()
        for close in closers:
            close()
    return 0


def _serve_buses(buses, control, out, command_buses) -> None:
    """Each bus in a thread of its own (its replies wait for the wire, not for the other buses); the
    control channel here, until a signal stops them."""
    import select
    import threading

    from snake_control.dynamixel.control import answer_lines

    threads = [threading.Thread(target=b.serve_forever, name=f'bus-{k}', daemon=True)
               for k, b in enumerate(buses)]
    for t in threads:
        t.start()
    cfd = control.fileno() if control is not None else None
    buf = b''
    while not buses[0].stop_requested:
        if cfd is None:
            time.sleep(0.05)
            continue
        try:
            ready, _, _ = select.select([cfd], [], [], 0.05)
        except InterruptedError:
            continue
        if not ready:
            continue
        chunk = os.read(cfd, 4096)
        if not chunk:
            cfd = None
            continue
        buf = answer_lines(buf, chunk, lambda line: command_buses(buses, line), out)
    for t in threads:
        t.join(timeout=2.0)


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
