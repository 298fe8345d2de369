"""main() helper shared by the node console scripts: init, build, spin, clean shutdown."""
from __future__ import annotations

import sys

import rclpy
from rclpy.executors import ExternalShutdownException


def run_node(node_class, args=None) -> int:
    """Run one node until Ctrl-C or shutdown. A configuration error (ValueError, FileNotFoundError,
    raised by the constructor with the file and key in its message) is printed as one line, exit 2."""
    rclpy.init(args=args)
    node = None
    try:
        node = node_class()
        rclpy.spin(node)
    except (ValueError, FileNotFoundError) as exc:
        print(f'{getattr(node_class, "NODE_NAME", node_class.__name__)}: error: {exc}', file=sys.stderr)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            close = getattr(node, 'close', None)
            if close is not None:
                close()
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0
