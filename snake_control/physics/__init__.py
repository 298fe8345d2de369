"""MuJoCo physics for snake robots: an MJCF model built from the robot YAML, and a world to step it.

    from snake_control.physics import SnakeWorld
    world = SnakeWorld('wheeled_8')
"""
from snake_control.physics.mjcf import PhysicsOptions, build_mjcf, servo_gains
from snake_control.physics.world import SnakeWorld

__all__ = ['PhysicsOptions', 'SnakeWorld', 'build_mjcf', 'servo_gains']
