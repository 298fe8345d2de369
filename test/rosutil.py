"""A small harness for tests with real DDS: nodes under test plus a probe node on one executor."""
from __future__ import annotations

import threading
import time

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node


class RosHarness:
    """Own context and executor, spun in a background thread; `probe` publishes and records."""

    def __init__(self, args=None):
        self.context = Context()
        rclpy.init(args=args, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.probe = Node('probe', context=self.context)
        self.executor.add_node(self.probe)
        self.nodes = []
        self._stop = threading.Event()
        self.error: Exception | None = None
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self):
        try:
            while self.context.ok() and not self._stop.is_set():
                self.executor.spin_once(timeout_sec=0.05)
        except Exception as exc:
            # A callback that raised stops every node here: keep it, so close() fails the test with it
            # instead of the test waiting on messages that will never come. Shutdown races are not errors.
            if not self._stop.is_set() and self.context.ok():
                self.error = exc

    def add(self, node):
        self.nodes.append(node)
        self.executor.add_node(node)
        return node

    def record(self, msg_type, topic, qos=10):
        """Subscribe on the probe; returns the list that fills with (monotonic time, message)."""
        received = []
        self.probe.create_subscription(msg_type, topic, lambda m: received.append((time.monotonic(), m)), qos)
        return received

    def publisher(self, msg_type, topic, qos=10):
        return self.probe.create_publisher(msg_type, topic, qos)

    def wait_for_subscribers(self, publisher, count=1, timeout_s=10.0):
        assert wait_until(lambda: publisher.get_subscription_count() >= count, timeout_s), \
            f'no subscriber on {publisher.topic_name} after {timeout_s} s'

    def close(self):
        self._stop.set()
        self._thread.join(timeout=5)
        for node in self.nodes:
            close = getattr(node, 'close', None)
            if close is not None:
                close()
        self.executor.shutdown()
        for node in self.nodes + [self.probe]:
            node.destroy_node()
        self.context.try_shutdown()
        if self.error is not None:
            raise AssertionError(f'a callback raised and stopped the executor: {self.error!r}') from self.error


def wait_until(predicate, timeout_s=10.0, period_s=0.01) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(period_s)
    return bool(predicate())
