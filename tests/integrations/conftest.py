"""Fixtures for the pydantic-ai suite: the local runtime in memory, on a virtual clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from continuum import Continuum, Status
from tests.integrations.agents import ENGINES
from tests.support import LocalRuntime
from tests.waits.conftest import _quiet_worker_logs  # noqa: F401 - worker logs at ERROR here too


class WorkerDied(BaseException):
    """Stands in for SIGKILL in-process: nothing in the framework catches it."""


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """How the test's task runs its agent: ``run_sync`` (a sync task) or ``run`` (async)."""
    engine: str = request.param
    return engine


@pytest.fixture
def make_runtime() -> Callable[..., LocalRuntime]:
    """``make_runtime(app, budget_s=5)``: the in-memory local runtime on a virtual clock."""

    def make(app: Continuum, budget_s: float = 5.0, **options: Any) -> LocalRuntime:
        return LocalRuntime(app, budget_s=budget_s, backend="memory", virtual_time=True, **options)

    return make


def drive_through_deaths(runtime: LocalRuntime, task_id: str, limit: int = 10) -> int:
    """Drive the task on, letting its worker die (WorkerDied) as often as it does; the dead
    invocation's message comes back after its visibility timeout. Returns the deaths."""
    deaths = 0
    while deaths <= limit:
        try:
            runtime.drive(task_id)
            return deaths
        except WorkerDied:
            deaths += 1
            assert runtime.record(task_id).status == Status.RUNNING
    raise AssertionError(f"the worker died more than {limit} times")
