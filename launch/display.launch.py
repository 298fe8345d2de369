"""Show a robot's model alone: robot_state_publisher, joint_state_publisher_gui (sliders) and RViz.

    ros2 launch snake_control display.launch.py robot:=pitch_yaw_32
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from snake_control.app.graph import rviz_config_path
from snake_control.paths import robot_names


def launch_setup(context, *args, **kwargs):
    from snake_control.description import urdf_xml

    robot = LaunchConfiguration('robot').perform(context)
    namespace = LaunchConfiguration('namespace').perform(context)
    return [
        Node(package='robot_state_publisher', executable='robot_state_publisher', namespace=namespace,
             parameters=[{'robot_description': urdf_xml(robot)}], output='screen'),
        Node(package='joint_state_publisher_gui', executable='joint_state_publisher_gui', namespace=namespace,
             output='screen'),
        # No odometry here: the tail link is the fixed frame.
        Node(package='rviz2', executable='rviz2', namespace=namespace,
             arguments=['-d', str(rviz_config_path()), '-f', 'link_0'], output='screen'),
    ]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument('robot', default_value='pitch_yaw_32',
                              description=f'robot description: a shipped name ({", ".join(robot_names())}) '
                                          f'or a path to a robot YAML'),
        DeclareLaunchArgument('namespace', default_value='snake',
                              description='ROS namespace (the RViz config reads /snake/robot_description)'),
        OpaqueFunction(function=launch_setup),
    ])
