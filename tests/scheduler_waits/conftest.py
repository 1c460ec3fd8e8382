"""Fixtures for the long waits on a scheduler: the worker's logs kept to errors (``make_runtime``,
on both backends, is tests/conftest.py's; each test passes ``scheduler=True``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import worker_logger


@pytest.fixture(autouse=True)
def _quiet_worker_logs() -> Iterator[None]:
    level = worker_logger.level
    worker_logger.setLevel("ERROR")
    yield
    worker_logger.setLevel(level)
