"""snake dxl: a bench tool for Dynamixel Protocol 2.0 servos (real adapter or `snake sim-bus`)."""
HELP = ('bench tool for Dynamixel servos: scan, ping, read/write registers, set id/baud, reboot, torque, '
        'monitor')
DESCRIPTION = '''Talk to Dynamixel Protocol 2.0 (X-series) servos on one port.

  snake dxl scan --port /dev/ttyUSB0                 every baud rate, every ID (broadcast ping)
  snake dxl ping 1,2,5-8 --port P --baud 57600
  snake dxl read 3 present_position temperature --port P --baud 1000000
  snake dxl write 3 return_delay_time 0 --port P     (EEPROM registers need torque off)
  snake dxl set-id 1 7 --port P                      change ID 1 into 7
  snake dxl set-baud 7 4000000 --port P --baud 57600 the servo answers at the new baud afterwards
  snake dxl reboot 7 --port P ;  snake dxl torque all off --port P
  snake dxl monitor --port P --baud 4000000          live table (Ctrl-C to stop; --count N cycles)

Registers are named as in the e-Manual's control table, lower case with underscores (goal_position,
Present Temperature and present-temperature all work); `snake dxl registers` lists them.
IDs: a number, a list/range (1,3,5-8), or all (found by broadcast ping).'''

from snake_control.dynamixel.models import SCAN_BAUDS  # noqa: E402  (pure data, cheap to import)


def add_arguments(parser):
    sub = parser.add_subparsers(dest='action', metavar='ACTION', required=True)

    def common(p, baud=True):
        p.add_argument('--port', default='/dev/ttyUSB0', help='serial device (default /dev/ttyUSB0)')
        if baud:
            p.add_argument('--baud', type=int, default=57600,
                           help='baud rate (default 57600, the factory default)')
        p.add_argument('--timeout-ms', type=float, default=20.0,
                       help='reply timeout beyond wire time (default 20 ms: covers a 16 ms USB latency '
                            'timer)')
        return p

    p = common(sub.add_parser('scan', help='find servos at every baud rate'), baud=False)
    p.add_argument('--bauds', default=','.join(map(str, SCAN_BAUDS)), help='comma-separated baud rates to try')
    p.add_argument('--ids', default=None, help='ping these IDs one by one instead of a broadcast ping')
    p = common(sub.add_parser('ping', help='ping servos'))
    p.add_argument('ids', help='ID, list, range or all')
    p = common(sub.add_parser('read', help='read registers by name'))
    p.add_argument('ids')
    p.add_argument('registers', nargs='+')
    p = common(sub.add_parser('write', help='write a register by name'))
    p.add_argument('ids')
    p.add_argument('register')
    p.add_argument('value', type=int)
    p = common(sub.add_parser('set-id', help='change a servo ID'))
    p.add_argument('old', type=int)
    p.add_argument('new', type=int)
    p = common(sub.add_parser('set-baud', help="change servos' baud rate"))
    p.add_argument('ids')
    p.add_argument('new_baud', type=int)
    p = common(sub.add_parser('reboot', help='reboot servos (clears hardware errors)'))
    p.add_argument('ids')
    p = common(sub.add_parser('torque', help='torque on/off'))
    p.add_argument('ids')
    p.add_argument('state', choices=('on', 'off'))
    p = common(sub.add_parser('monitor', help='live table of position, temperature, voltage, errors'))
    p.add_argument('ids', nargs='?', default='all')
    p.add_argument('--interval', type=float, default=0.2, help='seconds between updates')
    p.add_argument('--count', type=int, default=0, help='stop after N updates (0: until Ctrl-C)')
    sub.add_parser('registers', help='list the control table')


def parse_ids(text: str, bus=None) -> list[int]:
    """'3', '1,2,5-8' or 'all' (broadcast ping on ``bus``) -> sorted IDs; ValueError naming the text."""
    from snake_control.commands import CommandError
    if text == 'all':
        if bus is None:
            raise CommandError('"all" needs a bus')
        found = sorted(bus.broadcast_ping())
        if not found:
            raise CommandError(f'no servo answered a broadcast ping on {bus.port_name} at {bus.baud} baud '
                               f'(try `snake dxl scan --port {bus.port_name}`)')
        return found
    ids = set()
    try:
        for part in text.split(','):
            lo, dash, hi = part.partition('-')
            ids.update(range(int(lo), int(hi) + 1) if dash else [int(lo)])
    except ValueError:
        raise ValueError(f'IDs {text!r}: expected a number, a list such as 1,3,5-8, or all') from None
    bad = [i for i in ids if not 0 <= i <= 252]
    if bad:
        raise ValueError(f'IDs {text!r}: {bad} outside 0..252')
    return sorted(ids)


def _retry(fn, *args, attempts=3):
    """Repeat a register read/write (idempotent) when no valid reply came; the last error otherwise."""
    from snake_control.dynamixel.bus import CommError
    for k in range(attempts):
        try:
            return fn(*args)
        except CommError:
            if k == attempts - 1:
                raise


def _ping(bus, sid, attempts=3):
    """(model, firmware) of a servo, or None after ``attempts`` pings without an answer."""
    for _ in range(attempts):
        found = bus.ping(sid)
        if found:
            return found
    return None


VERIFY_PINGS = 10          # pings before a changed servo counts as not answering (a busy host can lose a few)


def _write_then_verify(fn, *args):
    """A write that changes how the servo answers (ID, baud): retried on a lost status; when every try
    is unanswered it may still have taken effect, so the caller verifies by pinging the new address."""
    from snake_control.dynamixel.bus import CommError
    try:
        _retry(fn, *args)
    except CommError:
        pass


def _open(args, baud=None):
    from snake_control.commands import CommandError
    from snake_control.dynamixel.bus import PortGone, ServoBus
    bus = ServoBus(args.port, baud or args.baud, args.timeout_ms)
    try:
        bus.open()
    except PortGone as exc:
        raise CommandError(str(exc)) from None
    return bus


def _model_name(number):
    from snake_control.dynamixel.models import MODEL_BY_NUMBER
    m = MODEL_BY_NUMBER.get(number)
    return m.name if m else f'unknown model {number}'


def _fmt(reg, value):
    from snake_control.dynamixel import protocol as P
    from snake_control.dynamixel.models import BAUD_BY_REGISTER, RAD_PER_TICK, CENTER_TICK
    import math
    extra = ''
    if reg.name in ('present_position', 'goal_position', 'min_position_limit', 'max_position_limit'):
        extra = f'  ({math.degrees((value - CENTER_TICK) * RAD_PER_TICK):+.1f} deg from centre)'
    elif reg.name == 'baud_rate':
        extra = f'  ({BAUD_BY_REGISTER.get(value, "?")} bit/s)'
    elif reg.name == 'hardware_error_status' and value:
        extra = f'  ({", ".join(P.decode_hardware_error(value))})'
    elif reg.name == 'present_input_voltage':
        extra = f'  ({value / 10:.1f} V)'
    elif reg.name == 'model_number':
        extra = f'  ({_model_name(value)})'
    return f'{value}{extra}'


def run(args) -> int:
    from snake_control.commands import CommandError
    from snake_control.dynamixel.bus import DxlError, PortGone, ServoError, SUPPORTED_BAUDS
    from snake_control.dynamixel.models import CONTROL_TABLE, REGISTER_BY_BAUD, register

    if args.action == 'registers':
        for r in CONTROL_TABLE.values():
            print(f'{r.name:24s} address {r.address:3d}  {r.size} byte(s)  '
                  f'{"EEPROM" if r.eeprom else "RAM   "}  {"rw" if r.writable else "r "}  '
                  f'default {r.default}')
        return 0

    if args.action == 'scan':
        bauds = [int(b) for b in args.bauds.split(',') if b]
        total = 0
        for baud in bauds:
            if baud not in SUPPORTED_BAUDS:
                raise ValueError(f'--bauds: {baud} is not a Dynamixel baud rate')
            try:
                bus = _open(args, baud)
            except ValueError:
                print(f'{baud:>8d}: not supported by this adapter/SDK')
                continue
            try:
                if args.ids:
                    found = {i: bus.ping(i) for i in parse_ids(args.ids)}
                    found = {i: v for i, v in found.items() if v}
                else:
                    found = bus.broadcast_ping()
            finally:
                bus.close()
            total += len(found)
            for sid, (model, fw) in sorted(found.items()):
                print(f'{baud:>8d}  ID {sid:3d}  {_model_name(model)} (model {model}), firmware {fw}')
            if not found:
                print(f'{baud:>8d}  none')
        print(f'{total} servo(s) found')
        return 0 if total else 1

    bus = _open(args)
    try:
        if args.action == 'ping':
            missing = 0
            for sid in parse_ids(args.ids, bus):
                found = _ping(bus, sid)
                if found:
                    print(f'ID {sid:3d}: {_model_name(found[0])} (model {found[0]}), firmware {found[1]}')
                else:
                    print(f'ID {sid:3d}: no answer')
                    missing += 1
            return 1 if missing else 0
        if args.action == 'read':
            regs = [register(n) for n in args.registers]
            for sid in parse_ids(args.ids, bus):
                for reg in regs:
                    print(f'ID {sid:3d} {reg.name} = {_fmt(reg, _retry(bus.read_register, sid, reg.name))}')
            return 0
        if args.action == 'write':
            reg = register(args.register)
            for sid in parse_ids(args.ids, bus):
                try:
                    _retry(bus.write_register, sid, reg.name, args.value)
                except ServoError as exc:
                    hint = ''
                    if reg.eeprom:
                        hint = f' ({reg.name} is EEPROM: turn torque off first: snake dxl torque {sid} off)'
                    raise CommandError(f'{exc}{hint}') from None
                print(f'ID {sid:3d} {reg.name} <- {args.value}')
            return 0
        if args.action == 'set-id':
            if not 0 <= args.new <= 252:
                raise ValueError(f'new ID {args.new} outside 0..252')
            if _ping(bus, args.new):
                raise CommandError(f'ID {args.new} is already taken on {args.port}')
            if not _ping(bus, args.old):
                raise CommandError(f'no servo with ID {args.old} on {args.port} at {args.baud} baud')
            _retry(bus.write_register, args.old, 'torque_enable', 0)
            _write_then_verify(bus.write_register, args.old, 'id', args.new)
            # The change may have taken effect with its status lost (later writes to the old ID then
            # go unanswered): the servo answering at its new ID is what counts.
            if not _ping(bus, args.new, VERIFY_PINGS):
                raise CommandError(f'servo did not answer as ID {args.new} after the change')
            print(f'ID {args.old} -> {args.new}')
            return 0
        if args.action == 'set-baud':
            if args.new_baud not in REGISTER_BY_BAUD:
                raise ValueError(f'baud {args.new_baud} is not a Dynamixel baud rate: '
                                 f'{sorted(REGISTER_BY_BAUD)}')
            ids = parse_ids(args.ids, bus)
            for sid in ids:
                _retry(bus.write_register, sid, 'torque_enable', 0)
                _write_then_verify(bus.write_register, sid, 'baud_rate', REGISTER_BY_BAUD[args.new_baud])
            bus.close()
            check = _open(args, args.new_baud)
            try:
                bad = [sid for sid in ids if not _ping(check, sid, VERIFY_PINGS)]
            finally:
                check.close()
            if bad:
                raise CommandError(f'servo(s) {bad} do not answer at {args.new_baud} baud after the change')
            print(f'{len(ids)} servo(s) now at {args.new_baud} baud')
            return 0
        if args.action == 'reboot':
            import time
            for sid in parse_ids(args.ids, bus):
                bus.reboot(sid)
                print(f'ID {sid:3d} rebooted')
            time.sleep(0.2)
            return 0
        if args.action == 'torque':
            for sid in parse_ids(args.ids, bus):
                _retry(bus.write_register, sid, 'torque_enable', 1 if args.state == 'on' else 0)
                print(f'ID {sid:3d} torque {args.state}')
            return 0
        if args.action == 'monitor':
            return _monitor(bus, parse_ids(args.ids, bus), args.interval, args.count)
    except (DxlError, PortGone) as exc:
        raise CommandError(str(exc)) from None
    finally:
        bus.close()
    return 0


def _monitor(bus, ids, interval, count) -> int:
    import math
    import sys
    import time
    from snake_control.dynamixel import protocol as P
    from snake_control.dynamixel.models import CENTER_TICK, RAD_PER_TICK, RAD_S_PER_VELOCITY_UNIT

    n = 0
    start, size = 64, 84           # torque (64) .. present temperature (146)
    tty = sys.stdout.isatty()
    try:
        while True:
            got = bus.sync_read(start, size, ids, fast=False)
            lines = [f'{"ID":>3} {"torque":>6} {"pos deg":>8} {"vel rad/s":>9} {"cur raw":>7} {"temp C":>6} '
                     f'{"volt V":>6}  errors']
            for sid in ids:
                if sid not in got:
                    lines.append(f'{sid:>3} no reply')
                    continue
                err, d = got[sid]
                pos = P.from_le(d[132 - start:136 - start], True)
                vel = P.from_le(d[128 - start:132 - start], True) * RAD_S_PER_VELOCITY_UNIT
                cur = P.from_le(d[126 - start:128 - start], True)
                volt = P.from_le(d[144 - start:146 - start]) / 10.0
                temp = d[146 - start]
                hw = d[70 - start]
                errors = ', '.join(P.decode_hardware_error(hw) + P.decode_error(err & 0x7F)) or '-'
                lines.append(f'{sid:>3} {"on" if d[0] else "off":>6} '
                             f'{math.degrees((pos - CENTER_TICK) * RAD_PER_TICK):>8.1f} '
                             f'{vel:>9.2f} {cur:>7d} '
                             f'{temp:>6d} {volt:>6.1f}  {errors}')
            if tty:
                sys.stdout.write('\x1b[H\x1b[2J')
            print('\n'.join(lines), flush=True)
            n += 1
            if count and n >= count:
                return 0
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0
