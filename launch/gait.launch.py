"""The whole snake controller: driver, gait, estimator and teleop nodes, robot_state_publisher, and
joy_node / RViz on request.

    ros2 launch snake_control gait.launch.py robot:=pitch_yaw_32 bus:=real port:=/dev/ttyUSB0 \
        baud:=4000000 namespace:=snake joy:=true rviz:=false

The node list comes from snake_control.app.graph.build_graph (the same list `snake bringup` runs in one
process); this file only turns it into launch_ros Nodes. Run `ros2 launch snake_control gait.launch.py
--show-args` for every argument.
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnShutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from snake_control.app.graph import GraphArgs, build_graph, launch_arguments, with_parameters


def node_action(spec):
    """A launch_ros Node for one NodeSpec."""
    return Node(package=spec.package, executable=spec.executable, name=spec.name, namespace=spec.namespace,
                parameters=[spec.parameters] if spec.parameters else [], remappings=list(spec.remappings),
                arguments=list(spec.arguments), output='screen', emulate_tty=True)


def launch_setup(context, *args, **kwargs):
    # Concrete values are needed here: the graph, the URDF and the emulated bus's device path depend on them.
    from snake_control.description import urdf_xml

    values = {a.name: LaunchConfiguration(a.name).perform(context) for a in launch_arguments()}
    graph_args = GraphArgs.from_strings(values)
    actions, port = [], None
    if graph_args.bus == 'sim':
        from snake_control.app.sim_bus import sim_bus_args
        from snake_control.dynamixel.simproc import SimBusProcess
        from snake_control.robot import load_robot
        baud = graph_args.baud or load_robot(graph_args.robot).bus.baud
        sim = SimBusProcess(sim_bus_args(graph_args.robot, baud, graph_args.physics))
        port = sim.path

        def stop_bus(event, ctx):
            sim.stop()          # returns nothing: no further launch actions
        actions.append(RegisterEventHandler(OnShutdown(on_shutdown=stop_bus)))
    for spec in build_graph(graph_args, port=port):
        if spec.executable == 'robot_state_publisher':
            spec = with_parameters(spec, robot_description=urdf_xml(graph_args.robot))
        actions.append(node_action(spec))
    return actions


def generate_launch_description():
    declared = [DeclareLaunchArgument(a.name, default_value=a.default, description=a.description,
                                      **({'choices': list(a.choices)} if a.choices else {}))
                for a in launch_arguments()]
    return LaunchDescription(declared + [OpaqueFunction(function=launch_setup)])
