# Everything runs from .venv, created and filled with pinned versions on first use.
# `make test` in a fresh clone needs nothing but python3 (3.11) and the package registries.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# DDS stays on this machine; the tests and the demo each pick a ROS_DOMAIN_ID of their own unless the
# caller chose one (test/conftest.py, snake demo).
export ROS_AUTOMATIC_DISCOVERY_RANGE ?= LOCALHOST
export RMW_IMPLEMENTATION ?= rmw_fastrtps_cpp
PYTEST_ARGS ?=

# The upstream ROS 2 command-line tools (ros2 launch/run/topic/param, tf2_msgs), where the team's shared
# folder has them, and colcon in a venv of its own; the tests that need them skip without them.
ROS2_TOOLS ?= ../shared/ros2-tools
COLCON_VENV := .venv-colcon

.PHONY: test demo bench venv clean lint ros2-tools

venv: $(STAMP)

$(STAMP): requirements.txt constraints.txt setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check pip==26.3 setuptools==84.2.1 wheel==0.48.0
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -c constraints.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(PY) -c "import rclpy, numpy, scipy, mujoco, dynamixel_sdk, serial, yaml, yourdfpy, mcap_ros2" 
	# Compile the estimator's kernels once into the on-disk cache (later processes load them).
	$(PY) -c "import snake_control.estimation.kernels as k; assert k.AVAILABLE"
	touch $(STAMP)

ros2-tools: $(STAMP)
	@if [ -x "$(ROS2_TOOLS)/install.sh" ]; then \
	  "$(ROS2_TOOLS)/install.sh" $(VENV) constraints.txt && \
	  { test -x $(COLCON_VENV)/bin/colcon || { $(PYTHON) -m venv $(COLCON_VENV) && \
	    $(COLCON_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
	      -r requirements-colcon.txt; }; }; \
	else echo "ros2-tools: $(ROS2_TOOLS) not found; tests of the ros2 command line will be skipped"; fi

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# pyflakes' checks (unused imports and names, undefined names), through flake8 so `# noqa` is honoured.
lint: $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check flake8 -c constraints.txt
	$(PY) -m flake8 --select F snake_control bench test launch

demo: $(STAMP)
	$(VENV)/bin/snake demo

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) $(COLCON_VENV) out build install log .pytest_cache .hypothesis
