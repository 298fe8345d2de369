"""Dynamixel Protocol 2.0 X-series servos: the data, the wire, the driver and an emulator.

models      servo models and the X-series control table (pure data)
protocol    CRC-16, byte stuffing, packet build/parse (pure functions)
bus         ServoBus on dynamixel_sdk with its traps coded around (timeouts, busy flag, zeros)
driver      Driver: the fixed-rate bus loop with start-up checks and safety policies
driver_config  DriverConfig, policies, watchdog defaults and constants
readings    register blocks and their decoder, plausibility checks, ServoState, Counters, diagnostics
safety      the pure safety rules: decide (mode, reasons, goal) and the resume ramp
fault_matrix  the driver through one bus fault at a time (tests and `make bench`)
plant       Plant interface (what moves emulated servos), MotorModel, register_plant
emulator    BusEmulator: servos behind a pseudo-terminal, with fault injection
simproc     SimBusProcess: `snake sim-bus` as a child process with its control channel
"""
