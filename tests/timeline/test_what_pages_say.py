"""What the timeline says about a task, as the page's data has it (the browser tests check
what Chromium draws of it)."""

from __future__ import annotations

from continuum.cli.steer import render
from continuum.timeline.model import timeline_data
from tests.timeline.tasks import LONG_STEP, live_answered, live_cancelled, live_checks


def test_a_finished_checkpoint_gives_no_reason_it_waited():
    lived = live_answered()
    waited = [c for c in lived.view.checkpoints if c.status == "waiting"]
    assert waited
    assert all("callback" in (c.reason or "") for c in waited)
    [done] = [c for c in lived.view.checkpoints if c.status == "succeeded"]
    assert done.reason is None


def test_a_cancelled_checkpoint_gives_the_cancel_reason():
    lived = live_cancelled("the customer withdrew the claim")
    [last] = [c for c in lived.view.checkpoints if c.status == "cancelled"]
    assert "the customer withdrew the claim" in (last.reason or "")


def test_each_map_items_steps_say_which_item_they_belong_to():
    lived = live_checks()
    data = timeline_data(lived.view)
    steps = [s for row in data["rows"] if row["kind"] == "run" for s in row["steps"]]
    ours = [s for s in steps if s["name"] == LONG_STEP and s["item"] is not None]
    assert sorted(s["item"] for s in ours) == [
        "claims#0 item 0",
        "claims#0 item 1",
        "claims#0 item 2",
    ]
    assert len({s["key"] for s in ours}) == 3
    text = render(lived.view)
    for s in ours:
        assert s["key"] in text


def test_inspect_says_a_cancelled_task_was_cancelled_not_that_it_erred():
    lived = live_cancelled("the customer withdrew the claim")
    text = render(lived.view)
    assert "cancelled in turn" in text
    assert "the customer withdrew the claim" in text
    assert "error TaskCancelledError" not in text
