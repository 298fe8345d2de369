"""The URDF (xacro + robot YAML) checked by independent parsers: yourdfpy, and Debian's check_urdf where
installed. Its forward kinematics must agree with ours."""
import shutil
import subprocess
import sys

import numpy as np
import pytest

from snake_control.description import urdf_xml
from snake_control.dynamixel.models import SERVO_MODELS
from snake_control.kinematics.chain import robot_frames
from snake_control.paths import robot_names, share_dir
from snake_control.robot import load_robot

ROBOTS = robot_names()


@pytest.fixture(scope='module', params=ROBOTS)
def urdf(request, tmp_path_factory):
    path = tmp_path_factory.mktemp('urdf') / f'{request.param}.urdf'
    path.write_text(urdf_xml(request.param))
    return load_robot(request.param), path


def test_yourdfpy_sees_our_joints(urdf):
    import yourdfpy
    robot, path = urdf
    model = yourdfpy.URDF.load(str(path), load_meshes=False, build_scene_graph=True)
    assert model.robot.name == robot.name
    actuated = model.actuated_joint_names
    assert actuated == robot.joint_names
    for joint in robot.joints:
        u = model.joint_map[joint.name]
        assert u.type == 'revolute'
        np.testing.assert_allclose(u.axis, joint.axis_vector)
        assert u.limit.lower == pytest.approx(joint.lower_rad)
        assert u.limit.upper == pytest.approx(joint.upper_rad)
        assert u.limit.velocity == pytest.approx(joint.velocity_limit_rad_s)
        assert u.limit.effort == pytest.approx(robot.bus.servo.stall_torque_nm)
    assert len(model.link_map) == robot.n_links
    mass = sum(link.inertial.mass for link in model.link_map.values())
    assert mass == pytest.approx(robot.n_links * robot.link_mass_kg)


def test_urdf_forward_kinematics_matches_ours(urdf):
    import yourdfpy
    robot, path = urdf
    model = yourdfpy.URDF.load(str(path), load_meshes=False, build_scene_graph=True)
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = rng.uniform(robot.lower_rad, robot.upper_rad)
        model.update_cfg(dict(zip(robot.joint_names, q)))
        ours = robot_frames(robot, q)
        for k in range(robot.n_links):
            frame = model.get_transform(f'link_{k}', 'link_0')
            # URDF link frames sit at the proximal joint (link_0 at its centre); ours at link centres.
            centre = frame.copy()
            if k > 0:
                centre[:3, 3] += frame[:3, 0] * robot.link_length_m / 2
            np.testing.assert_allclose(centre, ours[k], atol=1e-9)


@pytest.mark.skipif(shutil.which('check_urdf') is None, reason="Debian's liburdfdom-tools (check_urdf) not installed")
def test_check_urdf_accepts_it(urdf):
    robot, path = urdf
    out = subprocess.run(['check_urdf', str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f'robot name is: {robot.name}' in out.stdout
    assert 'Successfully Parsed XML' in out.stdout


def test_xacro_effort_table_matches_servo_models():
    # The xacro carries its own copy of the stall torques (xacro cannot import Python): keep them equal.
    text = (share_dir() / 'snake_description' / 'urdf' / 'snake.urdf.xacro').read_text()
    for model in SERVO_MODELS.values():
        assert f"('{model.name}', {model.stall_torque_nm})" in text, model.name


def test_snake_urdf_command_prints_it():
    out = subprocess.run([sys.executable, '-m', 'snake_control.cli', 'urdf', '--robot', 'kinematic_snake_3'],
                         capture_output=True, text=True, check=True)
    assert '<joint name="joint_2" type="revolute">' in out.stdout


def test_snake_urdf_refuses_bad_robot_with_named_key(tmp_path):
    bad = tmp_path / 'bad.yaml'
    text = (share_dir() / 'config' / 'robots' / 'wheeled_8.yaml').read_text().replace('length_m: 0.14', 'length_m: -1')
    bad.write_text(text)
    out = subprocess.run([sys.executable, '-m', 'snake_control.cli', 'urdf', '--robot', str(bad)],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert 'bad.yaml: link.length_m: must be between' in out.stderr
    assert 'Traceback' not in out.stderr
