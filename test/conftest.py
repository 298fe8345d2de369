"""Test-wide setup: every pytest run gets its own DDS domain on localhost only, so parallel runs on
one machine (developers, CI) never hear each other's topics."""
import os
import random

if 'ROS_DOMAIN_ID' not in os.environ or os.environ.get('SNAKE_TEST_RANDOM_DOMAIN', '1') == '1':
    # 1..101 are valid with the default port mapping; 0 is what an untouched machine uses.
    os.environ['ROS_DOMAIN_ID'] = str(random.SystemRandom().randint(1, 101))
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
os.environ.setdefault('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp')
os.environ.setdefault('MPLBACKEND', 'Agg')
# Offscreen GL as `snake render` and `snake demo` choose it, before any test imports mujoco (which picks
# its backend once, at import).
os.environ.setdefault('MUJOCO_GL', 'egl')

# CI runs hypothesis derandomized, so a red CI is reproducible and never a dice roll; developers'
# runs explore new examples each time.
from hypothesis import settings  # noqa: E402

settings.register_profile('ci', derandomize=True)
if os.environ.get('CI'):
    settings.load_profile('ci')


import gc  # noqa: E402
import threading  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope='module')
def _no_servo_driver_outlives_its_module():
    """A driver still running after its tests (one failed before its clean-up) would go on driving a
    servo bus in the background of every later test: stop it, and report the module that left it."""
    yield
    if not any(t.name == 'dxl-bus' and t.is_alive() for t in threading.enumerate()):
        return
    from snake_control.dynamixel.driver import Driver
    leaked = [obj for obj in gc.get_objects() if isinstance(obj, Driver) and obj.running]
    for driver in leaked:
        driver.stop()
    pytest.fail(f'{len(leaked)} servo driver(s) still running after this module\'s tests (now stopped): '
                f'{[d.port for d in leaked]}')
