"""Dynamixel Protocol 2.0 X-series servos: the data, the wire, the driver and an emulator.

models      servo models (with torque constants) and the X-series control table (pure data)
conversion  joint <-> servo angles, ticks, velocity, current and torque units (pure functions)
protocol    CRC-16, byte stuffing, packet build/parse (pure functions)
bus         ServoBus on dynamixel_sdk with its traps coded around (timeouts, busy flag, zeros)
driver      Driver: the fixed-rate bus loop with start-up checks and safety policies
driver_config  DriverConfig, policies, watchdog defaults and constants
readings    register blocks and their decoder, plausibility checks, ServoTable and ServoState, Counters, diagnostics
safety      the pure safety rules: decide (mode, reasons, goal) and the resume ramp
fault_matrix  the driver through one bus fault at a time (tests and `make bench`)
plant       Plant interface (what moves emulated servos) and the built-in MotorModel
servo       Servo: one emulated servo's control table and the e-Manual's rules for it
faults      FaultSpec: injected faults of the emulated bus
emulator    BusEmulator: servos behind a pseudo-terminal, wire timing, instruction dispatch
control     the emulated bus's control channel (state, goals, silent, trip, set, ...)
simbus      the emulated bus as a process: python -m snake_control.dynamixel.simbus
simproc     SimBusProcess: starts simbus as a child process and talks to its control channel
"""
