"""Thin rclpy shells around the snake_control libraries: one node per module, each with main(args=None)."""
