"""An observer that raises is logged and skipped: the task's outcome is the same, and every
observer after it still hears every event (AWS's plugin error isolation, and a faulty plugin
that does not affect a healthy one)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from continuum import Observer
from continuum._define.observers import Observer as Base
from tests.flavours import FLAVOURS
from tests.observers.test_saved_operations import trip_app

#: every hook an observer can override
HOOKS = [name for name in vars(Base) if not name.startswith("_")]


class Faulty(Observer):
    """Raises from every hook."""


def _raise(self: Any, event: Any) -> None:
    raise RuntimeError("faulty observer")


for _hook in HOOKS:
    setattr(Faulty, _hook, _raise)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_observer_that_raises_changes_nothing_for_the_task_or_the_others(
    flavour, make_runtime, caplog
):
    healthy_app, healthy = trip_app(flavour)
    expected = make_runtime(healthy_app).run("trip", {})

    app, after = trip_app(flavour, Faulty())  # the faulty one first, then one that records
    with caplog.at_level(logging.WARNING, logger="continuum._define.observers"):
        summary = make_runtime(app).run("trip", {})
    assert (summary.status, summary.result) == (expected.status, expected.result)
    assert after.changes() == healthy.changes()
    assert [(e.name, e.replaying_children) for e in after.entered] == [
        (e.name, e.replaying_children) for e in healthy.entered
    ]
    raised = [r for r in caplog.records if "faulty observer" in r.getMessage()]
    assert {r.getMessage().split(" in ")[1].split(":")[0] for r in raised} >= {
        "invocation_started",
        "invocation_ended",
        "step_started",
        "step_ended",
        "operations_saved",
        "task_finished",
    }
