"""Thin rclpy shells around the pure libraries: gait, driver, estimator and teleop nodes.

Each module defines one node class (its constructor forwards keyword arguments to rclpy.node.Node, so
`snake bringup` can build several in one process) and main(args=None) for its console script.
"""
