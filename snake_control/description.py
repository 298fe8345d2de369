"""The robot's URDF, built in a loop from the validated Robot model.

Every URDF user reads it from here: `snake urdf`, the launch files (robot_state_publisher's
``robot_description``) and `snake bringup`, so RViz and every other tool see the same model. The values
come from the model, not the raw YAML: joint limits with joint_defaults already merged, and each joint's
effort limit from the servo model's stall torque (snake_control.dynamixel.models).

Links ``link_0`` (tail) .. ``link_n`` (head). link_0's frame is at the tail link's centre (the estimator
broadcasts odom -> link_0); every other link's frame is at its proximal joint, x along the link toward
the head. Joint i joins link_i to link_(i+1); axes: yaw about z, pitch about y, counter-clockwise
positive (docs/kinematics.md). Passive wheels (planar robots) are fixed visuals: they roll in physics
(snake_control.physics.mjcf), not in the kinematic tree.

>>> xml = urdf_xml('kinematic_snake_3')
>>> '<joint name="joint_2" type="revolute">' in xml
True
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

from snake_control.robot import Robot, load_robot

SHELL_RGBA = '0.85 0.45 0.1 1'
WHEEL_RGBA = '0.15 0.15 0.15 1'
WHEEL_WIDTH_M = 0.01


def _num(x: float) -> str:
    """Shortest text that reads back to the same float, so the URDF's FK equals ours to rounding."""
    x = float(x)
    return '0' if x == 0.0 else repr(x)


def _xyz(*v: float) -> str:
    return ' '.join(_num(c) for c in v)


def _cylinder(parent: ET.Element, tag: str, xyz, rpy, radius_m: float, length_m: float,
              material: str | None = None) -> None:
    el = ET.SubElement(parent, tag)
    ET.SubElement(el, 'origin', xyz=_xyz(*xyz), rpy=_xyz(*rpy))
    ET.SubElement(ET.SubElement(el, 'geometry'), 'cylinder', radius=_num(radius_m), length=_num(length_m))
    if material is not None:
        ET.SubElement(el, 'material', name=material)


def _link(robot: Robot, k: int, centre_x_m: float) -> ET.Element:
    """Link k: a solid cylinder along x whose centre lies centre_x_m along its own frame's x."""
    link = ET.Element('link', name=f'link_{k}')
    r, l = robot.module_radius_m, robot.link_length_m
    along_x = (0.0, math.pi / 2, 0.0)   # a URDF cylinder's axis is z: turn it onto x
    _cylinder(link, 'visual', (centre_x_m, 0, 0), along_x, r, l, 'shell')
    _cylinder(link, 'collision', (centre_x_m, 0, 0), along_x, r, l)
    inertial = ET.SubElement(link, 'inertial')
    ET.SubElement(inertial, 'origin', xyz=_xyz(centre_x_m, 0, 0), rpy='0 0 0')
    ET.SubElement(inertial, 'mass', value=_num(robot.link_mass_kg))
    ixx, iyy, izz = robot.link_inertia_kg_m2
    ET.SubElement(inertial, 'inertia', ixx=_num(ixx), ixy='0', ixz='0', iyy=_num(iyy), iyz='0', izz=_num(izz))
    if robot.wheels is not None:
        for side in (1.0, -1.0):
            _cylinder(link, 'visual', (centre_x_m, side * robot.wheels.track_m / 2, 0), (math.pi / 2, 0, 0),
                      robot.wheels.radius_m, WHEEL_WIDTH_M, 'wheel')
    return link


def urdf_element(robot: Robot) -> ET.Element:
    """The URDF of a validated robot as an ElementTree ``<robot>`` element."""
    root = ET.Element('robot', name=robot.name)
    for name, rgba in (('shell', SHELL_RGBA), ('wheel', WHEEL_RGBA)):
        ET.SubElement(ET.SubElement(root, 'material', name=name), 'color', rgba=rgba)
    effort_nm = robot.bus.servo.stall_torque_nm
    l = robot.link_length_m
    root.append(_link(robot, 0, 0.0))
    for i, joint in enumerate(robot.joints):
        root.append(_link(robot, i + 1, l / 2))
        el = ET.SubElement(root, 'joint', name=joint.name, type='revolute')
        ET.SubElement(el, 'parent', link=f'link_{i}')
        ET.SubElement(el, 'child', link=f'link_{i + 1}')
        # link_0's frame is at its centre, every other link's at its proximal joint.
        ET.SubElement(el, 'origin', xyz=_xyz(l / 2 if i == 0 else l, 0, 0), rpy='0 0 0')
        ET.SubElement(el, 'axis', xyz=_xyz(*joint.axis_vector))
        ET.SubElement(el, 'limit', lower=_num(joint.lower_rad), upper=_num(joint.upper_rad),
                      velocity=_num(joint.velocity_limit_rad_s), effort=_num(effort_nm))
    return root


def urdf_from_robot(robot: Robot) -> str:
    """URDF text for a validated Robot."""
    root = urdf_element(robot)
    ET.indent(root, space='  ')
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding='unicode') + '\n'


def urdf_xml(robot: str | Path) -> str:
    """URDF text for a robot name or YAML path. The YAML is validated first, so a bad file fails with a
    ConfigError naming the key."""
    return urdf_from_robot(load_robot(robot))
