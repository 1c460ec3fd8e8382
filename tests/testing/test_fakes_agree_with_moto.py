"""The store and the queue answer alike on both backends, through the runtime's own views.

The cases are the backend contract (``tests/backends/test_contract.py``), run here as a
third-party backend would run them: imported, with the fixtures ``store`` and ``queue``
replaced, here by the observer's store and the event source's queue of a ``LocalRuntime`` on
``[memory]`` and ``[moto]``, the very objects the other tests look through.
"""

from __future__ import annotations

import pytest

from continuum import Continuum
from tests.backends.test_contract import *  # noqa: F403
from tests.support import LocalRuntime


@pytest.fixture
def runtime(aws):
    return LocalRuntime(Continuum(), budget_s=900, backend=aws)


@pytest.fixture
def store(runtime):
    return runtime.observer_store


@pytest.fixture
def queue(runtime):
    return runtime.source


@pytest.fixture
def on_moto(runtime):
    return runtime.backend == "moto"
