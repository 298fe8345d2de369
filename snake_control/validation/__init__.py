"""Validation, a layer above physics, estimation and gaits: a gait drives the robot in the MuJoCo
world and the state estimator, fed the measured joint angles alone, is scored against the true pose
(runs: the runs, their error table and plots, `snake validate`).
"""
