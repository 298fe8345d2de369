"""ament_python package snake_control: builds with colcon on ROS 2 Humble/Jazzy, and with pip into .venv."""
from glob import glob
import os

from setuptools import find_packages, setup

PACKAGE = 'snake_control'


def tree(folder):
    """(share destination, files) pairs for every file below folder, keeping the layout."""
    pairs = {}
    for path in glob(os.path.join(folder, '**', '*'), recursive=True):
        if os.path.isfile(path):
            dest = os.path.join('share', PACKAGE, os.path.dirname(path))
            pairs.setdefault(dest, []).append(path)
    return sorted(pairs.items())


setup(
    name=PACKAGE,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*', 'bench', 'bench.*']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + PACKAGE]),
        ('share/' + PACKAGE, ['package.xml']),
        *tree('launch'),
        *tree('config'),
        *tree('snake_description'),
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='snake_control developers',
    maintainer_email='snake-control@example.org',
    description='Gaits, a Dynamixel driver, a simulated servo bus and a state estimator for snake robots.',
    license='Apache-2.0',
    tests_require=['pytest'],
    entry_points={
        'console_scripts': [
            'snake = snake_control.cli:main',
            'gait_node = snake_control.nodes.gait_node:main',
            'driver_node = snake_control.nodes.driver_node:main',
            'estimator_node = snake_control.nodes.estimator_node:main',
            'link_tf_node = snake_control.nodes.link_tf_node:main',
            'teleop_node = snake_control.nodes.teleop_node:main',
        ],
    },
)
