"""The whole snake controller: driver, gait, estimator and teleop nodes, robot_state_publisher, and
joy_node / RViz on request. A node of another package that is not installed is left out with one line.

    ros2 launch snake_control gait.launch.py robot:=pitch_yaw_32 bus:=real port:=/dev/ttyUSB0 \
        baud:=4000000 namespace:=snake joy:=true rviz:=false

The node list comes from snake_control.app.graph.build_graph (the same list `snake bringup` runs in one
process); this file only turns it into launch_ros Nodes. Run `ros2 launch snake_control gait.launch.py
--show-args` for every argument.
"""
import os

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from snake_control.app.graph import GraphArgs, build_graph, launch_arguments, package_available, with_parameters
from snake_control.nodes.runner import PARENT_PID_ENV

# The launch argument that leaves out each optional node of another package.
OPTIONAL = {'robot_state_publisher': 'robot_state_publisher', 'joy': 'joy', 'rviz2': 'rviz'}


def node_action(spec):
    """A launch_ros Node for one NodeSpec. Each knows this process's id: launch ended by SIGTERM or
    SIGKILL does not signal its nodes, so they stop when it has gone (snake_control.nodes.runner)."""
    return Node(package=spec.package, executable=spec.executable, name=spec.name, namespace=spec.namespace,
                parameters=[spec.parameters] if spec.parameters else [], remappings=list(spec.remappings),
                arguments=list(spec.arguments), output='screen', emulate_tty=True,
                additional_env={PARENT_PID_ENV: str(os.getpid())})


def report_and_stop_bus(sim):
    """Say whether the driver left every emulated servo with torque off, then stop the bus."""
    import launch.logging
    try:
        servos = sim.command('state', timeout_s=5.0)['servos']
        on = sorted(int(i) for i, s in servos.items() if s['torque'])
        text = (f'emulated bus: torque off on all {len(servos)} servos' if not on else
                f'emulated bus: torque STILL ON on {len(on)} of {len(servos)} servos (IDs {on})')
    except (RuntimeError, KeyError, OSError, ValueError) as exc:
        text = f'emulated bus: torque state unknown ({exc})'
    launch.logging.get_logger('snake_control').info(text)
    sim.stop()


def launch_setup(context, *args, **kwargs):
    # Concrete values are needed here: the graph, the URDF and the emulated bus's device path depend on them.
    from snake_control.description import urdf_xml

    values = {a.name: LaunchConfiguration(a.name).perform(context) for a in launch_arguments()}
    graph_args = GraphArgs.from_strings(values)
    actions, port, sim = [], None, None
    if graph_args.bus == 'sim':
        from snake_control.app.sim_bus import sim_bus_args
        from snake_control.dynamixel.simproc import SimBusProcess
        from snake_control.robot import load_robot
        baud = graph_args.baud or load_robot(graph_args.robot).bus.baud
        from snake_control.nodes.sim_imu import NAMESPACE_ENV
        os.environ[NAMESPACE_ENV] = graph_args.namespace     # the world's IMU publishes into the graph's
        sim = SimBusProcess(sim_bus_args(graph_args.robot, baud, graph_args.physics))
        port = ','.join(sim.paths)      # one device per bus
    for spec in build_graph(graph_args, port=port):
        if spec.package in OPTIONAL and not package_available(spec.package):
            actions.append(LogInfo(msg=f'{spec.package} is not installed: {spec.name} not started '
                                       f'({OPTIONAL[spec.package]}:=false leaves it out)'))
            continue
        if spec.executable == 'robot_state_publisher':
            spec = with_parameters(spec, robot_description=urdf_xml(graph_args.robot))
        action = node_action(spec)
        actions.append(action)
        if sim is not None and spec.name == 'driver_node':
            # The emulated bus goes only once the driver has exited, so its torque-off reaches the servos
            # (launch signals every node at once on shutdown).
            def stop_bus(event, ctx):
                report_and_stop_bus(sim)
            actions.append(RegisterEventHandler(OnProcessExit(target_action=action, on_exit=stop_bus)))
    return actions


def generate_launch_description():
    declared = [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description,
                                      **({'choices': list(a.choices)} if a.choices else {}))
                for a in launch_arguments()]
    return LaunchDescription(declared + [OpaqueFunction(function=launch_setup)])
