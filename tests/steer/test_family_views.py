"""``inspect``, ``cost`` and the timeline of a task with child tasks, parent and child alike:
the parent lists its children (status, cost) and a child names its parent and its place."""

from __future__ import annotations

import pytest

from continuum._local.runtime import BUCKET
from continuum.cli import main
from continuum.cli.steer import render
from continuum.timeline import timeline_page
from samples import research_team
from tests.support import inspect_task


@pytest.fixture
def team(make_runtime):
    runtime = make_runtime(research_team.app, budget_s=60)
    summary = runtime.run("lead", {"topic": "tides", "latency_scale": 0.01}, task_id="lead-1")
    assert summary.status == "succeeded", summary.error
    return runtime


def test_inspect_lists_a_parents_children_with_their_status_and_cost(team):
    view = inspect_task(team.observer, "lead-1")
    kids = {t.task_id: t for t in team.app.client().tasks() if t.task_id != "lead-1"}
    assert sorted(c.task_id for c in view.children) == sorted(kids)
    assert [c.index for c in view.children] == list(range(len(kids)))
    for child in view.children:
        assert child.status == kids[child.task_id].status
        assert child.cost is not None
        assert child.cost > 0
    assert {c.task_name for c in view.children} == {"researcher"}
    assert view.parent is None
    text = render(view)
    for child in view.children:
        assert child.task_id in text


def test_inspect_names_a_childs_parent_and_its_place_in_the_batch(team):
    parent = inspect_task(team.observer, "lead-1")
    last = parent.children[-1]
    view = inspect_task(team.observer, last.task_id)
    assert view.parent is not None
    assert (view.parent.task_id, view.parent.batch, view.parent.index) == (
        "lead-1",
        last.batch,
        last.index,
    )
    assert view.children == []
    assert "child of lead-1" in render(view)


def test_the_timeline_page_of_a_parent_and_of_a_child_renders(team):
    parent = inspect_task(team.observer, "lead-1")
    assert parent.children[0].task_id in timeline_page(parent)
    child = inspect_task(team.observer, parent.children[0].task_id)
    assert '"parent":{"task_id":"lead-1"' in timeline_page(child)


@pytest.mark.moto_only("the CLI reads the bucket with boto3 through --bucket")
def test_the_cli_inspects_and_prices_a_parent_and_a_child(team, capsys):
    children = inspect_task(team.observer, "lead-1").children
    for task_id in ("lead-1", children[0].task_id):
        for command in ("inspect", "cost"):
            assert main([command, task_id, "--bucket", BUCKET]) == 0, (command, task_id)
            out, err = capsys.readouterr()
            assert err == ""
            assert task_id in out or command == "cost"
    assert main(["cost", "lead-1", "--bucket", BUCKET]) == 0
    out = capsys.readouterr().out
    assert f"{len(children)} child tasks" in out


def test_the_dev_pages_of_a_parent_and_its_children_answer(team):
    from continuum.timeline.server import TimelineServer
    from tests.timeline.test_dev_pages import get

    children = inspect_task(team.observer, "lead-1").children
    with TimelineServer(team.app.client()) as server:
        status, listing = get(server.url)
        assert status == 200
        for task_id in ("lead-1", *(c.task_id for c in children)):
            assert f'data-task-id="{task_id}"' in listing
            status, page = get(f"{server.url}tasks/{task_id}")
            assert status == 200, page
            assert f'"task_id":"{task_id}"' in page
