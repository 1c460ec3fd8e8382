"""The page `continuum inspect TASK_ID --html FILE` writes, as headless Chromium renders it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from continuum._ops.prices import money
from continuum.cli import main
from continuum.timeline import timeline_page
from tests.support import BUCKET, REGION, LocalRuntime, moto_backend
from tests.timeline.tasks import PUBLISH_ERROR, live_ask, timeline_app

#: What the page shows, read from the DOM after its script ran.
RENDERED = """(() => {
  const box = (n) => n.getBoundingClientRect();
  const text = (sel) => document.querySelector(sel)?.textContent ?? null;
  return {
    rendered: document.body.dataset.rendered,
    status: text("#status"), header: text("#task"), error: text("#error"),
    cost: text("#cost"), details: text("#details"),
    runs: [...document.querySelectorAll(".row.run")].map((r) => ({
      number: Number(r.dataset.number),
      end: r.querySelector(".end").textContent,
      steps: r.querySelectorAll(".bar .step").length,
      crashed_bar: r.querySelector(".bar.bar-crashed") !== null,
      bar_px: box(r.querySelector(".bar")).width,
      track_px: box(r.querySelector(".track")).width,
      checkpoints: r.querySelectorAll(".cp").length,
    })),
    gaps: [...document.querySelectorAll(".row.gap")].map((g) => ({
      classes: g.className, when: g.querySelector(".label").textContent,
      label: g.querySelector(".gap-label").textContent,
      border: getComputedStyle(g.querySelector(".track")).borderTopStyle,
    })),
  };
})()"""


@pytest.fixture(scope="module")
def report_page(report, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pages") / "report.html"
    path.write_text(timeline_page(report.view))
    return path


@pytest.fixture
def shown(browser, report_page):
    browser.open(report_page.as_uri())
    return browser.evaluate(RENDERED)


def test_each_invocation_is_a_bar_with_its_steps_inside_and_its_end_marked(report, shown):
    assert shown["rendered"] == "yes"
    runs = report.view.invocations
    assert [r["number"] for r in shown["runs"]] == [r.number for r in runs]
    assert [r["steps"] for r in shown["runs"]] == [len(r.steps) for r in runs]
    for drawn, run in zip(shown["runs"], runs, strict=True):
        assert run.outcome.value in drawn["end"]
        assert drawn["crashed_bar"] == (run.outcome == "crashed")
    assert sum(r["checkpoints"] for r in shown["runs"]) > len(runs)


def test_a_two_day_sleep_is_a_dashed_gap_that_does_not_squash_the_bars(shown):
    [sleep, callback] = [g for g in shown["gaps"] if "gap-waiting" in g["classes"]]
    assert sleep["when"] == "2 d 0 h"
    assert "sleep 'cool-off'" in sleep["label"]
    assert "191 timer hops" in sleep["label"]
    assert "woken by: timer" in sleep["label"]
    assert sleep["border"] == "dashed"
    assert callback["when"] == "3 h 0 min"
    assert "callback 'approve'" in callback["label"]
    [crash] = [g for g in shown["gaps"] if "gap-crashed" in g["classes"]]
    assert "visibility timeout" in crash["label"]
    # The fullest invocation spans most of its track although the task lived two days.
    assert max(r["bar_px"] / r["track_px"] for r in shown["runs"]) > 0.9


def test_the_error_the_state_and_the_cost_are_on_the_page(report, shown):
    assert shown["status"] == "failed"
    assert PUBLISH_ERROR in shown["error"]
    assert "publish#0" in shown["error"]
    assert "1 crashed" in shown["header"]
    assert money(report.view.cost["total"]) in shown["cost"]
    assert "tides: page 11" in shown["details"]  # the latest checkpoint's state, at first


def test_clicking_a_checkpoint_shows_the_state_and_journal_saved_there(report, browser, shown):
    # The first checkpoint a suspension wrote with some pages done: under load an invocation
    # may suspend before its first step, and its checkpoint holds none.
    index = next(
        i
        for i, c in enumerate(report.view.checkpoints)
        if c.status == "suspended" and 0 < len(c.state["pages"]) < 12
    )
    checkpoint = report.view.checkpoints[index]
    browser.evaluate(f"document.querySelector('.cp[data-index=\"{index}\"]').click()")
    state = browser.evaluate(
        "JSON.parse(document.querySelector('#details .state pre').textContent)"
    )
    keys = browser.evaluate(
        "[...document.querySelectorAll('#details table.journal tbody tr td:first-child')]"
        ".map((td) => td.textContent)"
    )
    assert state == checkpoint.state
    assert 0 < len(state["pages"]) < 12
    assert keys == [entry.key for entry in checkpoint.journal]


def test_clicking_an_invocation_shows_its_steps_and_where_it_left_the_task(report, browser, shown):
    run = next(r for r in report.view.invocations if r.outcome == "waiting" and r.steps)
    browser.evaluate(f"document.getElementById('run-{run.number}').click()")
    details = browser.evaluate("document.querySelector('#details').textContent")
    steps = browser.evaluate("document.querySelectorAll('#details table.steps tbody tr').length")
    assert f"Invocation #{run.number}" in details
    assert "then waited for sleep 'cool-off'" in details
    assert steps == len(run.steps)
    assert '"slept": false' in details  # the checkpoint it wrote: asleep, before waking


def test_the_page_requests_nothing_and_breaks_none_of_its_own_policy(browser, report_page):
    browser.requests.clear()
    browser.open(report_page.as_uri())
    assert browser.requests == [report_page.as_uri()]
    assert browser.violations() == []


def test_a_state_that_looks_like_markup_is_shown_as_text(browser, tmp_path, quiet):
    note = "</script><script>window.pwned = 1</script><!-- <b>bold</b>"
    page = tmp_path / "ask.html"
    page.write_text(timeline_page(live_ask(note).view))
    browser.open(page.as_uri())
    assert browser.evaluate("window.pwned === undefined")
    assert browser.evaluate("document.querySelectorAll('script').length") == 2
    assert note in browser.evaluate("document.querySelector('#details').textContent")
    assert browser.evaluate("document.querySelector('#details b')") is None


def test_a_realistic_timeline_screenshot_is_a_whole_page(browser, report_page, tmp_path):
    browser.open(report_page.as_uri())
    png = browser.screenshot(tmp_path / "report.png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) >= (1400, 900)


def test_inspect_html_writes_the_page_from_the_stored_records(tmp_path, capsys, quiet, browser):
    with moto_backend():
        runtime = LocalRuntime(timeline_app(), budget_s=0.1, virtual_time=True)
        with runtime.time.running():
            done = runtime.run("tally", {"n": 4}, task_id="tally-cli")
        out = tmp_path / "tally.html"
        code = main(["inspect", "tally-cli", "--html", str(out), "--bucket", BUCKET,
                     "--region", REGION])  # fmt: skip
        to_stdout = main(["inspect", "tally-cli", "--html", "-", "--bucket", BUCKET,
                          "--region", REGION])  # fmt: skip
    assert (code, to_stdout) == (0, 0)
    printed = capsys.readouterr().out
    assert printed.startswith(f"wrote {out}: the timeline of tally-cli")
    assert printed.splitlines()[1] == "<!doctype html>"  # then the page itself, with "-"
    browser.open(out.as_uri())
    assert browser.evaluate("document.querySelector('#status').textContent") == "succeeded"
    assert browser.evaluate("document.querySelectorAll('.row.run').length") == done.invocations
    result = browser.evaluate("document.querySelector('#result pre').textContent")
    assert json.loads(result) == done.result
