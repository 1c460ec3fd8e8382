"""continuum's pytest plugin: fixtures for testing tasks.

pytest loads it through the ``pytest11`` entry point of an installed continuum (``-p
no:continuum`` turns it off). Loading it registers an ini option and a marker; it changes
nothing else, and each fixture does its work only for a test that asks for it. (A test that
freezes time itself needs nothing of it: ``import continuum`` readies freezegun's fake dates
for pydantic, ``continuum._base.frozen_clocks``.)

Fixtures:

- ``continuum_app``: the app under test. By default the ``continuum_app`` ini option
  (``continuum_app = "my_agent:app"`` under ``[tool.pytest.ini_options]``); or define your own
  fixture of that name in ``conftest.py``.
- ``continuum_runner``: a :class:`~continuum.testing.TaskRunner` over ``continuum_app``, open
  for the test. ``@pytest.mark.continuum(backend="moto", budget_s=2)`` passes it options.
- ``continuum_runner_factory``: ``make(app, **options)`` for another app or other options;
  each runner it makes is open until the test ends.

Example:
    >>> def test_word_count(continuum_runner):  # doctest: +SKIP
    ...     task = continuum_runner.run("word_count", {"lines": ["a b"]})
    ...     assert task.result == {"a": 1, "b": 1}
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from continuum import Continuum
    from continuum.testing import TaskRunner

#: The ini option naming the app under test.
APP_OPTION = "continuum_app"
#: The marker whose keyword arguments become the ``continuum_runner`` fixture's options.
MARKER = "continuum"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(APP_OPTION, help="the app under test for continuum's fixtures (MODULE:NAME)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**options): TaskRunner options for the continuum_runner fixture "
        '(backend="moto", budget_s=2, ...)',
    )


@pytest.fixture
def continuum_app(pytestconfig: pytest.Config) -> Continuum:
    """The app under test: the ``continuum_app`` ini option (MODULE:NAME), unless a
    ``conftest.py`` defines this fixture."""
    return app_under_test(pytestconfig)


def app_under_test(config: pytest.Config) -> Continuum:
    """The app the ``continuum_app`` ini option names.

    Raises:
        pytest.UsageError: the option is not set (the message says how to set it).
        ConfigurationError: it does not name an app that imports.
    """
    from continuum import Continuum
    from continuum._app.loading import load_target

    target = config.getini(APP_OPTION)
    if not target:
        raise pytest.UsageError(
            "continuum's fixtures need the app under test: set continuum_app = "
            '"my_module:app" under [tool.pytest.ini_options], or define a continuum_app '
            "fixture in conftest.py"
        )
    return load_target(str(target), Continuum, what=f"the {APP_OPTION} ini option")


@pytest.fixture
def continuum_runner_factory() -> Iterator[Callable[..., TaskRunner]]:
    """``make(app, **options)``: an open TaskRunner (closed when the test ends)."""
    from continuum.testing import TaskRunner

    with contextlib.ExitStack() as stack:

        def make(app: Continuum, **options: Any) -> TaskRunner:
            return stack.enter_context(TaskRunner(app, **options))

        yield make


@pytest.fixture
def continuum_runner(
    request: pytest.FixtureRequest,
    continuum_app: Continuum,
    continuum_runner_factory: Callable[..., TaskRunner],
) -> TaskRunner:
    """A TaskRunner over ``continuum_app``, open for the test; ``@pytest.mark.continuum(...)``
    gives its options."""
    marker = request.node.get_closest_marker(MARKER)
    if marker is not None and marker.args:
        raise pytest.UsageError(f"@pytest.mark.{MARKER} takes keyword options only")
    return continuum_runner_factory(continuum_app, **(marker.kwargs if marker else {}))
