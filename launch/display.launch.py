"""Show a robot's model alone: robot_state_publisher, joint_state_publisher_gui (sliders) and RViz. A node
whose package is not installed is left out with one line.

    ros2 launch snake_control display.launch.py robot:=pitch_yaw_32
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, LogInfo, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from snake_control.app.graph import BOOL_CHOICES, package_available, rviz_config_path
from snake_control.paths import robot_names


def launch_setup(context, *args, **kwargs):
    from snake_control.description import urdf_xml

    robot = LaunchConfiguration('robot').perform(context)
    namespace = LaunchConfiguration('namespace').perform(context)
    nodes = [('robot_state_publisher', 'robot_state_publisher', None,
              dict(parameters=[{'robot_description': urdf_xml(robot)}])),
             ('joint_state_publisher_gui', 'joint_state_publisher_gui', 'gui', {}),
             # No odometry here: the tail link is the fixed frame.
             ('rviz2', 'rviz2', 'rviz', dict(arguments=['-d', str(rviz_config_path()), '-f', 'link_0']))]
    actions = []
    for package, executable, switch, extra in nodes:
        if switch and LaunchConfiguration(switch).perform(context) != 'true':
            continue
        if not package_available(package):
            actions.append(LogInfo(msg=f'{package} is not installed: {executable} not started' +
                                       (f' ({switch}:=false leaves it out)' if switch else '')))
            continue
        actions.append(Node(package=package, executable=executable, namespace=namespace, output='screen',
                            **extra))
    return actions


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument('robot', default_value='pitch_yaw_32',
                              description=f'robot description: a shipped name ({", ".join(robot_names())}) '
                                          f'or a path to a robot YAML'),
        DeclareLaunchArgument('namespace', default_value='snake',
                              description='ROS namespace (the RViz config reads /snake/robot_description)'),
        DeclareLaunchArgument('gui', default_value='true', choices=list(BOOL_CHOICES),
                              description='start joint_state_publisher_gui (a slider per joint)'),
        DeclareLaunchArgument('rviz', default_value='true', choices=list(BOOL_CHOICES),
                              description='start RViz'),
        OpaqueFunction(function=launch_setup),
    ])
