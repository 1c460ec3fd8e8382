"""The pytest plugin: with continuum installed, a test suite has its fixtures, opt-in."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from datetime import timedelta
from importlib.metadata import entry_points
from pathlib import Path

import _pytest.timing
import pytest

from continuum import Status
from continuum.testing import TaskRunner, pytest_plugin
from tests.testing.apps import shop
from tests.testing.readme import blocks
from tests.waits.test_cancel import cancellable_app

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def continuum_app():
    """This module's app under test (the plugin's own fixture reads the ini option)."""
    return shop()[0]


def test_the_plugin_is_the_pytest11_entry_point_and_is_loaded(pytestconfig):
    [plugin] = [ep for ep in entry_points(group="pytest11") if ep.name == "continuum"]
    assert plugin.value == "continuum.testing.pytest_plugin"
    assert pytestconfig.pluginmanager.has_plugin("continuum")


def test_continuum_runner_is_an_open_runner_over_continuum_app(continuum_runner, continuum_app):
    assert continuum_runner.app is continuum_app
    assert continuum_runner.backend == "memory"
    task = continuum_runner.run("approve", {"item": "kayak"})
    task.callback("manager").complete({"approved": True})
    assert task.result == "shipped kayak #1"


@pytest.mark.continuum(backend="moto", budget_s=5)
def test_the_continuum_marker_gives_the_runner_its_options(continuum_runner):
    assert (continuum_runner.backend, continuum_runner.budget_s) == ("moto", 5)
    assert continuum_runner.run("listen", {"wants": 0}).status == Status.WAITING


def test_the_factory_makes_open_runners_that_close_when_the_test_ends(continuum_runner_factory):
    app, _ = shop()
    first = continuum_runner_factory(app, budget_s=60)
    second = continuum_runner_factory(cancellable_app()[0])
    assert isinstance(first, TaskRunner)
    assert first.budget_s == 60
    assert first.run("listen", {"wants": 0}).status == Status.WAITING
    assert second.run("chore", {"sleep_days": 1}).result == "finished anyway"


def test_pytests_own_clock_stays_real_while_the_runner_moves_the_virtual_one(continuum_runner):
    continuum_runner.advance(timedelta(days=1))
    # --durations and junit times come from _pytest.timing: they stay true.
    assert time.time() - _pytest.timing.time() > 86_000


def test_the_readme_fixture_example_runs_as_shown(tmp_path):
    example, *_, fixture_example = blocks("python")  # the first example, then the fixtures
    [settings] = blocks("toml")
    (tmp_path / "orders.py").write_text(example)
    (tmp_path / "pyproject.toml").write_text(settings)
    (tmp_path / "test_orders.py").write_text(fixture_example)
    shown = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "1 passed" in shown.stdout


def test_without_the_ini_option_the_app_fixture_says_how_to_name_the_app(pytestconfig):
    assert not pytestconfig.getini("continuum_app")  # this repository names none
    hint = 'set continuum_app = "my_module:app" under [tool.pytest.ini_options]'
    with pytest.raises(pytest.UsageError, match=re.escape(hint)):
        pytest_plugin.app_under_test(pytestconfig)
