"""Suite-wide options and markers.

``--target pyswitch|bmv2`` chooses the P4 target of the packet tests (tests/switch_harness.py).
Tests marked ``root`` skip unless run as root, ``mininet`` ones unless Debian's Mininet imports;
CI runs as root, so there they all run.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
from switch_harness import pytest_addoption  # noqa: F401  (registers --target)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    not_root = os.geteuid() != 0
    no_mininet = importlib.util.find_spec("mininet") is None
    for item in items:
        if not_root and item.get_closest_marker("root"):
            item.add_marker(pytest.mark.skip(reason="needs root"))
        if no_mininet and item.get_closest_marker("mininet"):
            item.add_marker(pytest.mark.skip(reason="Debian's Mininet is not importable"))
