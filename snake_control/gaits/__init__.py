"""Gait engine: backbone-curve fitting (backbone), the gait catalogue (catalog), the scheduler, and
the controller (the gait loop's e-stop, command filter and torque check around the scheduler).

Pure numpy; the ROS gait node is a thin shell around GaitController.
"""
from snake_control.gaits.backbone import (  # noqa: F401
    MCCCurve, chain_fit_error, joint_angles, joint_windows, kabsch_rms)
from snake_control.gaits.catalog import GAITS, BACKBONE_GAITS, gait_spec, gaits_for  # noqa: F401
from snake_control.gaits.scheduler import GaitScheduler, GaitState, GaitTick  # noqa: F401
