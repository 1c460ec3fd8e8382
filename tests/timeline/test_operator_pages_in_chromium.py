"""The operator's pages (``continuum ui``; ``continuum dev`` serves the same) of a real run on
moto, as headless Chromium draws them and as docs/operating.md shows them: checked by their
structure (headings, rows, buttons, nothing wider than the window, a whole page drawn), not
pixel by pixel. The screenshots docs/images holds are these, made by
``.venv/bin/python -m tests.timeline.operator_pages docs/images``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.timeline.browser import chromium
from tests.timeline.operator_pages import (
    DECLINED,
    DESKTOP,
    FEEDS,
    NAMES,
    PHONE,
    Shot,
    png_size,
    screenshots,
)

#: A run on moto whose agent takes its sample's seconds, and two browsers: seconds in all.
SLOW = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
#: A page of one colour compresses to a few kilobytes; a drawn page is many times that.
BLANK_PAGE_BYTES = 12_000
#: How far a picture's height may be from the page's now (an extra invocation row is not a
#: new layout).
STALE_HEIGHT = 0.25
#: What the agent did before it stopped for the approval, row by row (the Agent box).
AGENT_ROWS = [
    "model scripted-support",
    "tool lookup_order",
    "model scripted-support",
    "tool refund_policy",
    "model scripted-support",
    "approval issue_refund",
]


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory, quiet: None) -> dict[str, Shot]:
    chromium()
    home = tmp_path_factory.mktemp("operator-pages")
    return {shot.name: shot for shot in screenshots(home, home / "profiles")}


@SLOW
def test_every_page_is_drawn_whole_at_its_width_with_nothing_wider_than_the_window(shots):
    assert sorted(shots) == sorted(NAMES)
    for name, shot in shots.items():
        width = PHONE[0] if name.endswith("-phone") else DESKTOP[0]
        assert shot.png.startswith(b"\x89PNG\r\n\x1a\n"), name
        assert shot.size[0] == width, name
        assert shot.size[1] >= (PHONE if name.endswith("-phone") else DESKTOP)[1], name
        assert len(shot.png) > BLANK_PAGE_BYTES, name
        assert shot.page["innerWidth"] == width, name
        assert shot.page["scrollWidth"] <= width, name
        assert shot.page["widest"] <= width, name
        assert shot.page["violations"] == [], name  # nothing the pages' policy refused


@SLOW
@pytest.mark.parametrize("name", ["ui-task-list", "ui-task-list-phone"])
def test_the_list_shows_each_task_with_its_children_under_it(shots, name):
    page = shots[name].page
    assert page["h1"] == "continuum ui: tasks"
    children = [f"digest-1207.0.feeds-0.{i}" for i in range(len(FEEDS))]
    assert [t["id"] for t in page["tasks"]] == [
        "support-88",
        "invoice-204",
        "digest-1207",
        *children,
    ]
    assert [t["depth"] for t in page["tasks"]] == ["0", "0", "0", "1", "1", "1"]
    [rows] = [rows for cls, rows in page["tables"].items() if cls == "tasks"]
    assert [row[2] for row in rows] == ["waiting", "failed", *["succeeded"] * 4]
    assert "waits for callback 'approve.issue_refund'" in rows[0][0]


@SLOW
def test_an_agent_task_shows_its_model_requests_tool_calls_and_the_approval_it_waits_for(shots):
    for name in ("ui-agent-task", "ui-agent-task-phone"):
        page = shots[name].page
        assert page["h1"] == "support-88 support", name
        assert "Waits for" in page["h2"], name
        assert "Agent (6) turn 0" in page["h2"], name
        agent = page["tables"]["agent"]
        assert [row[0] for row in agent] == AGENT_ROWS, name
        assert agent[-1][1:] == ['{"cents":4599,"order_id":"A-1001"}', "waiting"], name
        seen = {b["text"] for b in page["buttons"] if b["seen"]}
        assert {"Approve", "Deny", "Complete callback"} <= seen, name
        # It suspends on its budget before it asks (how often depends on the machine's speed).
        assert page["runs"] >= 2, name


@SLOW
def test_a_failed_task_shows_where_it_raised_and_a_retry_button(shots):
    page = shots["ui-failed-task"].page
    assert page["h1"] == "invoice-204 invoice"
    assert any(h.startswith("Failed: PaymentDeclined") for h in page["h2"])
    assert page["traceback"] is not None
    assert "in _card_gateway" in page["traceback"]
    assert page["traceback"].rstrip().endswith(f"PaymentDeclined: {DECLINED}")
    assert [b["text"] for b in page["buttons"] if b["seen"]] == ["Retry task"]


@SLOW
def test_a_parent_lists_its_child_tasks_and_its_result(shots):
    page = shots["ui-parent-task"].page
    assert page["h1"] == "digest-1207 digest"
    headings = [re.sub(r"\$[\d.]+", "$C", h) for h in page["h2"]]  # the cost varies
    assert f"Child tasks ({len(FEEDS)}) $C more" in headings
    children = page["tables"]["children"]
    assert [row[1] for row in children] == [f"digest-1207.0.feeds-0.{i}" for i in range(len(FEEDS))]
    assert [row[3] for row in children] == ["succeeded"] * len(FEEDS)
    assert "Result" in page["h2"]


@SLOW
def test_the_pictures_in_the_docs_are_about_the_size_of_the_pages_drawn_now(shots):
    # Not pixels (times, ids and costs differ run to run): a page whose layout changed is
    # another height, and its picture in the docs is stale.
    for name, shot in shots.items():
        committed = png_size((ROOT / "docs" / "images" / f"{name}.png").read_bytes())
        assert committed[0] == shot.size[0], name
        assert abs(committed[1] - shot.size[1]) <= STALE_HEIGHT * shot.size[1], (
            f"docs/images/{name}.png is {committed[1]} px high, the page now {shot.size[1]}: "
            "remake the pictures with .venv/bin/python -m tests.timeline.operator_pages docs/images"
        )


def test_the_docs_show_every_screenshot_of_the_pages_at_the_width_it_was_taken():
    operating = (ROOT / "docs" / "operating.md").read_text()
    for name in NAMES:
        assert f"](images/{name}.png)" in operating, name
        width = PHONE[0] if name.endswith("-phone") else DESKTOP[0]
        assert png_size((ROOT / "docs" / "images" / f"{name}.png").read_bytes())[0] == width
    approval = (ROOT / "docs" / "approval-links.md").read_text()
    assert "](images/approval-link.png)" in approval  # tests.timeline.approval_page makes it
    assert png_size((ROOT / "docs" / "images" / "approval-link.png").read_bytes())[0] == PHONE[0]
