"""The timeline suite: tasks run once per session (a two-day sleep is 192 timer hops), and one
headless Chromium shared by the browser tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import worker_logger
from tests.timeline.browser import Browser, chromium
from tests.timeline.tasks import Lived, live_report, live_tally


@pytest.fixture(scope="session")
def quiet() -> Iterator[None]:
    level = worker_logger.level
    worker_logger.setLevel("ERROR")
    yield
    worker_logger.setLevel(level)


@pytest.fixture(scope="session")
def report(quiet: None) -> Lived:
    """The report's whole life: suspensions, a death, two days' sleep, a callback, a failure."""
    return live_report()


@pytest.fixture(scope="session")
def tally(quiet: None) -> Lived:
    return live_tally()


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    chromium()
    home = tmp_path_factory.mktemp("chromium")
    with Browser(home / "profile") as opened:
        yield opened
