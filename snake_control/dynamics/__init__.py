"""Dynamics of snake chains: seed 001's moving-frame method and gait torque checks."""
