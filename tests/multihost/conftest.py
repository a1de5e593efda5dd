"""The multi-host tests need root (network namespaces) and iproute2's `ip`."""

from __future__ import annotations

import os
import shutil

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip every multi-host test where namespaces cannot be made."""
    if os.geteuid() == 0 and shutil.which("ip"):
        return
    skip = pytest.mark.skip(reason="network namespaces need root and iproute2's `ip`")
    for item in items:
        if "multihost" in item.nodeid:
            item.add_marker(skip)
