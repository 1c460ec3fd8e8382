"""The docs' fixtures: the README's install block, run once per session (tests/fresh.py)."""

from __future__ import annotations

import pytest

from tests.fresh import Installed, install_once


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A copy of the checkout, the wheel built and installed in its .venv as the README says."""
    return install_once(tmp_path_factory)
