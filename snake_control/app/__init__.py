"""The application: the node graph and the ways to run it.

- graph: which nodes run, with which names, parameters and remappings (plain data, shared by
  launch/gait.launch.py and `snake bringup`).
- bringup: that graph in one process (the driver in a child process), with a script player and a
  recorder.
- session: a recorded session (MCAP) read into arrays and drawn.
- demo: `snake demo`, both shipped robots driven through their scripts in MuJoCo.
"""
