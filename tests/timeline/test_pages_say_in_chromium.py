"""What the pages say, as headless Chromium draws them: a cancel is not a failure, step bars
are named, a map's items are told apart, long journal keys leave the result room, a parent
lists its children and the list shows them under it, and the list moves by itself."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from continuum.timeline import timeline_page
from continuum.timeline.server import TimelineServer
from samples import research_team
from tests.support import LocalRuntime, inspect_task
from tests.timeline.tasks import LONG_STEP, live_cancelled, live_checks, live_report


def open_page(browser, tmp_path: Path, view) -> None:
    page = tmp_path / f"{view.task_id}.html"
    page.write_text(timeline_page(view))
    browser.open(page.as_uri())
    assert browser.evaluate("document.body.dataset.rendered") == "yes"


def test_a_cancelled_task_is_headed_cancelled_with_its_reason_not_failed(browser, tmp_path, quiet):
    lived = live_cancelled("the customer withdrew the claim")
    open_page(browser, tmp_path, lived.view)
    box = browser.evaluate(
        "(() => { const b = document.querySelector('#error'); return {classes: b.className,"
        " heading: b.querySelector('h2').textContent, text: b.textContent,"
        " border: getComputedStyle(b).borderLeftColor,"
        " fail: getComputedStyle(document.documentElement).getPropertyValue('--fail')}; })()"
    )
    assert box["heading"].startswith("Cancelled")
    assert "Failed" not in box["text"]
    assert "the customer withdrew the claim" in box["text"]
    assert "box-error" not in box["classes"]
    assert box["border"] != "rgb(210, 63, 63)"  # not the failure red (--fail: #d23f3f)


def test_each_step_bar_carries_its_steps_name(browser, tmp_path, quiet):
    lived = live_report()
    open_page(browser, tmp_path, lived.view)
    names = browser.evaluate(
        "[...document.querySelectorAll('.bar .step')].map((s) => s.textContent)"
    )
    keys = [s.key for run in lived.view.invocations for s in run.steps]
    assert names == [key.rpartition("#")[0] for key in keys]


def test_a_maps_items_are_told_apart_and_a_long_key_leaves_the_result_room(
    browser, tmp_path, quiet
):
    lived = live_checks()
    open_page(browser, tmp_path, lived.view)
    [run] = lived.view.invocations
    browser.evaluate(f"document.getElementById('run-{run.number}').click()")
    rows = browser.evaluate(
        "[...document.querySelectorAll('#details table.steps tbody tr td:first-child')]"
        ".map((td) => ({name: td.querySelector('.key').firstChild.textContent,"
        " item: td.querySelector('.item')?.textContent ?? null}))"
    )
    ours = [r for r in rows if r["name"] == LONG_STEP and r["item"] is not None]
    assert sorted(r["item"] for r in ours) == [f"claims#0 item {i}" for i in range(3)]
    # The journal of the last checkpoint: the result column keeps most of its width.
    widths = browser.evaluate(
        "[...document.querySelectorAll('#details table.journal tbody tr')].map((tr) =>"
        " ({key: tr.cells[0].getBoundingClientRect().width,"
        " result: tr.cells[tr.cells.length - 1].getBoundingClientRect().width,"
        " table: tr.closest('table').getBoundingClientRect().width}))"
    )
    assert widths
    for row in widths:
        assert row["result"] >= 0.35 * row["table"], row
        assert row["key"] <= 0.45 * row["table"], row


@pytest.fixture(scope="module")
def team(quiet):
    runtime = LocalRuntime(research_team.app, budget_s=60, backend="memory", virtual_time=True)
    with runtime.time.running():
        summary = runtime.run("lead", {"topic": "tides", "latency_scale": 0.01}, task_id="lead-1")
    assert summary.status == "succeeded", summary.error
    return runtime


def test_a_parent_lists_its_children_and_a_child_links_its_parent(team, browser):
    view = inspect_task(team.observer, "lead-1")
    with TimelineServer(team.app.client()) as server:
        browser.open(f"{server.url}tasks/lead-1")
        children = browser.evaluate(
            "[...document.querySelectorAll('#children tbody tr')].map((tr) =>"
            " ({id: tr.cells[1].textContent, status: tr.cells[3].textContent}))"
        )
        assert [c["id"] for c in children] == [c.task_id for c in view.children]
        assert [c["status"] for c in children] == [c.status.value for c in view.children]
        browser.evaluate("document.querySelector('#children tbody tr a').click()")
        browser.wait_for_event("Page.loadEventFired")
        parent = browser.evaluate("document.querySelector('#parent').textContent")
        assert parent.startswith("child of lead-1 · item 0 of batch ")
        browser.evaluate("document.querySelector('#parent a').click()")
        browser.wait_for_event("Page.loadEventFired")
        assert browser.evaluate("document.querySelector('h1').textContent").startswith("lead-1")
        assert browser.violations() == []


def test_the_list_shows_children_under_their_parent(team, browser):
    view = inspect_task(team.observer, "lead-1")
    with TimelineServer(team.app.client()) as server:
        browser.open(server.url)
        rows = browser.evaluate(
            "[...document.querySelectorAll('tr.task')].map((tr) => ({id: tr.dataset.taskId,"
            " classes: tr.className, indent: getComputedStyle(tr.cells[0]).paddingLeft}))"
        )
    assert [r["id"] for r in rows] == ["lead-1", *(c.task_id for c in view.children)]
    assert "depth-0" in rows[0]["classes"]
    assert all("depth-1" in r["classes"] for r in rows[1:])
    assert all(float(r["indent"][:-2]) > float(rows[0]["indent"][:-2]) for r in rows[1:])


def test_the_list_page_moves_without_a_reload(team, browser):
    with TimelineServer(team.app.client()) as server:
        browser.open(server.url)
        before = browser.evaluate("document.querySelectorAll('tr.task').length")
        team.app.client().start("researcher", {"topic": "tides", "question": "why"}, task_id="r-9")
        deadline = time.monotonic() + 10
        while browser.evaluate("document.querySelector('tr[data-task-id=\"r-9\"]') === null"):
            assert time.monotonic() < deadline, "the list did not refresh itself"
            time.sleep(0.2)
        assert browser.evaluate("document.querySelectorAll('tr.task').length") == before + 1
