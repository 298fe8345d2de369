# Everything runs from .venv, created and filled with pinned versions on first use.
# `make test` in a fresh clone needs nothing but python3 (3.11) and the package registries.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Isolate DDS: every make invocation gets its own domain unless the caller chose one.
export ROS_AUTOMATIC_DISCOVERY_RANGE ?= LOCALHOST
export RMW_IMPLEMENTATION ?= rmw_fastrtps_cpp
PYTEST_ARGS ?=

.PHONY: test demo bench venv clean lint

venv: $(STAMP)

$(STAMP): requirements.txt constraints.txt setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check pip==26.3 setuptools==84.2.1 wheel==0.48.0
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt -c constraints.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(PY) -c "import rclpy, numpy, scipy, mujoco, dynamixel_sdk, serial, yaml, yourdfpy, mcap_ros2" 
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

demo: $(STAMP)
	$(VENV)/bin/snake demo

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) out build install log .pytest_cache .hypothesis
