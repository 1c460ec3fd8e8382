"""Fixtures for the waits suite: the worker's logs kept to errors, and ``flavour``, which runs a
test once with its task written ``def`` and once ``async def`` (``make_runtime``, on both
backends, is tests/conftest.py's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import worker_logger
from tests.waits.flavours import FLAVOURS, Flavour


@pytest.fixture(autouse=True)
def _quiet_worker_logs() -> Iterator[None]:
    level = worker_logger.level
    worker_logger.setLevel("ERROR")
    yield
    worker_logger.setLevel(level)


@pytest.fixture(params=FLAVOURS)
def flavour(request: pytest.FixtureRequest) -> Flavour:
    """The flavour of the test's task, ``sync`` or ``async`` (``tests/waits/flavours.py``)."""
    return Flavour(request.param)
