"""snake urdf: print a robot's URDF."""
HELP = 'print the URDF of a robot (built from its validated robot model)'
DESCRIPTION = '''Print the URDF of a robot to standard output.

The URDF is built by snake_control/description.py from the validated robot model, the same text that
launch/display.launch.py, gait.launch.py and `snake bringup` feed robot_state_publisher.

  snake urdf --robot pitch_yaw_32 > pitch_yaw_32.urdf
  snake urdf --robot ./my_robot.yaml | check_urdf /dev/stdin'''


def add_arguments(parser):
    parser.add_argument('--robot', required=True,
                        help='shipped robot name (pitch_yaw_32, wheeled_8, kinematic_snake_3) '
                             'or a robot YAML path')


def run(args) -> int:
    from snake_control.description import urdf_xml
    print(urdf_xml(args.robot), end='')
    return 0
