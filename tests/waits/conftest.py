"""Fixtures for the waits suite: the local runtime on a virtual clock, on both backends."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from continuum import Continuum
from tests.support import LocalRuntime, moto_backend, worker_logger


@pytest.fixture(autouse=True)
def _quiet_worker_logs() -> Iterator[None]:
    level = worker_logger.level
    worker_logger.setLevel("ERROR")
    yield
    worker_logger.setLevel(level)


@pytest.fixture(params=["memory", "moto"])
def make_runtime(request: pytest.FixtureRequest) -> Iterator[Callable[..., LocalRuntime]]:
    """``make_runtime(app, budget_s=5)``: a local runtime on a virtual clock."""

    def make(app: Continuum, budget_s: float = 5.0, **options: Any) -> LocalRuntime:
        return LocalRuntime(
            app, budget_s=budget_s, backend=request.param, virtual_time=True, **options
        )

    if request.param == "moto":
        with moto_backend():
            yield make
    else:
        yield make
