"""What moves the emulated servos: the Plant interface and the built-in motor model.

The servo emulator owns the control tables and the wire; a Plant owns the mechanics. Every emulator
tick it calls ``plant.step(dt_s, goals_rad_by_id, torque_on_by_id)`` and writes what comes back into
Present Position/Velocity/Current. A physics world (the MuJoCo coupling) implements the same class; the
caller that starts it hands it to the emulator (``BusEmulator(..., plant=...)``, or ``--physics
MODULE:FACTORY`` for the emulator process): this package never imports a physics engine by itself.

Angles here are SERVO angles in rad from the centre tick (2048), i.e. after the joint's offset and
direction (snake_control.dynamixel.conversion), velocities in rad/s, currents in A. The emulator calls
``set_profile`` whenever Profile Velocity/Acceleration change; a plant may ignore it.
"""
from __future__ import annotations

import math

from snake_control.dynamixel.models import ServoModel


class Plant:
    """Mechanics behind the emulated servos. Subclass and override step (and configure).

    ``threaded``: True for a plant whose step releases the interpreter lock (a physics engine): the
    emulator then steps it in a thread of its own, so replies never wait behind a physics step.
    """

    threaded = False

    def configure(self, servo_id: int, model: ServoModel, position_rad: float) -> None:
        """Called once per servo before the first step: its model and initial servo angle (rad)."""

    def set_profile(self, servo_id: int, velocity_rad_s: float, acceleration_rad_s2: float) -> None:
        """Profile limits of one servo (math.inf where the register is 0, i.e. unlimited)."""

    def step(self, dt_s: float, goals_rad_by_id: dict[int, float],
             torque_on_by_id: dict[int, bool]) -> dict[int, tuple[float, float, float]]:
        """Advance dt_s seconds; return {id: (position_rad, velocity_rad_s, current_a)} for every servo."""
        raise NotImplementedError


class MotorModel(Plant):
    """Default plant: each servo's position controller follows its goal with a trapezoidal profile.

    Velocity is bounded by min(profile velocity, no-load speed) and acceleration by the profile
    acceleration (a stiff 300 rad/s^2 when unlimited), decelerating to stop on the goal. Current is
    the torque for a small reflected inertia and viscous load divided by the model's torque constant
    (stall torque / stall current, snake_control.dynamixel.models). With torque off a joint coasts to rest (50 ms time constant).
    """

    LOAD_INERTIA_KG_M2 = 0.002
    VISCOUS_NM_S_PER_RAD = 0.05
    HOLD_CURRENT_A = 0.02
    UNLIMITED_ACCEL_RAD_S2 = 300.0
    MAX_SUBSTEP_S = 0.005

    def __init__(self):
        self.pos, self.vel, self.cur = {}, {}, {}
        self.vmax, self.amax, self.models = {}, {}, {}
        self.kt = {}                        # torque constant, N m/A

    def configure(self, servo_id, model, position_rad):
        self.pos[servo_id], self.vel[servo_id], self.cur[servo_id] = float(position_rad), 0.0, 0.0
        self.models[servo_id] = model
        self.vmax[servo_id] = model.no_load_speed_rad_s
        self.amax[servo_id] = self.UNLIMITED_ACCEL_RAD_S2
        self.kt[servo_id] = model.torque_constant_nm_per_a

    def set_profile(self, servo_id, velocity_rad_s, acceleration_rad_s2):
        model = self.models[servo_id]
        self.vmax[servo_id] = min(velocity_rad_s, model.no_load_speed_rad_s)
        self.amax[servo_id] = min(acceleration_rad_s2, self.UNLIMITED_ACCEL_RAD_S2)

    def step(self, dt_s, goals_rad_by_id, torque_on_by_id):
        # Every servo, every mechanics step: what does not change within it is looked up or computed
        # once per servo. (The same arithmetic on numpy arrays over the servos measured no faster at
        # a bus's 32: numpy's per-call cost eats what the loop saves.)
        n = max(1, math.ceil(dt_s / self.MAX_SUBSTEP_S)) if dt_s > 0 else 0
        h = dt_s / n if n else 0.0
        decay = math.exp(-h / 0.05) if n else 1.0
        inertia, viscous, hold = self.LOAD_INERTIA_KG_M2, self.VISCOUS_NM_S_PER_RAD, self.HOLD_CURRENT_A
        vel, cur, amax_by, vmax_by, kt_by = self.vel, self.cur, self.amax, self.vmax, self.kt
        goals, torque_on = goals_rad_by_id.get, torque_on_by_id.get
        copysign, sqrt = math.copysign, math.sqrt
        pos = self.pos
        out = {}
        for sid, q in pos.items():
            v = vel[sid]
            acc = 0.0
            on = torque_on(sid, False)
            goal = goals(sid, q)
            if on:
                ah = amax_by[sid] * h
                ahh, vmax = ah * h, vmax_by[sid]
                for _ in range(n):
                    e = goal - q
                    # Fastest speed from which discrete steps of ah still stop exactly on the goal.
                    v_stop = ah * (sqrt(0.25 + 2.0 * abs(e) / ahh) - 0.5)
                    v_des = copysign(min(vmax, v_stop), e)
                    dv = max(-ah, min(ah, v_des - v))
                    acc = dv / h
                    v += dv
                    q_next = q + v * h
                    if (goal - q_next) * e <= 0.0:      # reached or passed the goal this substep
                        q_next, v = goal, 0.0
                    q = q_next
                torque = inertia * acc + viscous * v
                # torque_nm_to_current_a for one float, without numpy's per-call cost
                c = torque / kt_by[sid] + copysign(hold, torque if torque else 1.0)
            else:
                for _ in range(n):
                    v *= decay
                    q += v * h
                c = 0.0
            pos[sid], vel[sid], cur[sid] = q, v, c
            out[sid] = (q, v, c)
        return out
