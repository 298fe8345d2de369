"""The package as a ROS user installs it: its tracked files in a colcon workspace, `colcon build`, and
command lines run with `install/setup.bash` sourced. Shared by the ros2 command-line tests and benches."""
from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
COLCON = ROOT / '.venv-colcon' / 'bin' / 'colcon'


def ros2_tools_missing() -> str | None:
    """Why the ros2 command line cannot be used here, or None."""
    try:
        import launch_ros  # noqa: F401
        import ros2cli  # noqa: F401
    except ImportError:
        return 'the ROS 2 command-line tools are not installed (make ros2-tools installs them from the ' \
               'shared ros2-tools folder)'
    if not (VENV_BIN / 'ros2').exists():
        return f'no ros2 command in {VENV_BIN}'
    if not COLCON.exists():
        return 'colcon is not installed (.venv-colcon: make ros2-tools)'
    return None


def build_workspace(ws: Path) -> Path:
    """Copy the tracked files to ws/src/snake_control and `colcon build` them; returns ws."""
    src = ws / 'src' / 'snake_control'
    files = subprocess.run(['git', 'ls-files', '-z'], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split('\0')):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    build = subprocess.run([str(COLCON), 'build', '--packages-select', 'snake_control'], cwd=ws,
                           capture_output=True, text=True, timeout=300)
    if build.returncode != 0:
        raise RuntimeError(f'colcon build failed: {build.stdout[-2000:]} {build.stderr[-2000:]}')
    return ws


def shell(ws: Path, command: str) -> list[str]:
    """bash -c with the workspace sourced and the project's venv first on PATH (where rclpy lives)."""
    return ['bash', '-c', f'export PATH={shlex.quote(str(VENV_BIN))}:$PATH && '
                          f'source {shlex.quote(str(ws / "install" / "setup.bash"))} && {command}']
