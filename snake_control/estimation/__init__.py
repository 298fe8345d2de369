"""State estimation for snake robots (pure numpy): see snake_control.estimation.estimator."""
