"""MuJoCo physics for snake robots.

- mjcf: the MJCF model built from the validated robot (servo actuators, wheels or anisotropic skin).
- world: SnakeWorld, a running world: joint goals in; joint states, torques and link poses out.
- servo_plant: that world as the plant behind the emulated servo bus (`--physics mujoco`), writing
  ground truth in the estimator's body frame.

    from snake_control.physics import SnakeWorld
    world = SnakeWorld('wheeled_8')
"""
from snake_control.physics.mjcf import PhysicsOptions, build_mjcf, servo_gains
from snake_control.physics.world import SnakeWorld

__all__ = ['PhysicsOptions', 'SnakeWorld', 'build_mjcf', 'servo_gains']
