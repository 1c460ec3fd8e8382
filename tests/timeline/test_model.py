"""What the timeline draws, worked out from the task's view (no browser needed)."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from continuum.timeline import timeline_data, timeline_page
from continuum.timeline.page import script_json
from tests.timeline.tasks import PUBLISH_ERROR, live_ask

DAY_S = 86_400


def runs_of(data):
    return [row for row in data["rows"] if row["kind"] == "run"]


def gaps_of(data):
    return [row for row in data["rows"] if row["kind"] == "gap"]


def test_rows_are_the_invocations_in_order_with_a_gap_between_each_two(report):
    data = timeline_data(report.view)
    kinds = [row["kind"] for row in data["rows"]]
    assert kinds == ["run", "gap"] * (len(report.view.invocations) - 1) + ["run"]
    assert [r["number"] for r in runs_of(data)] == [r.number for r in report.view.invocations]
    outcomes = [r["outcome"] for r in runs_of(data)]
    assert outcomes.count("suspended") >= 2
    assert "crashed" in outcomes
    assert outcomes[-3:] == ["waiting", "waiting", "failed"]  # the sleep, the callback, the end


def test_the_two_day_sleep_is_one_gap_that_says_what_it_waited_for_and_its_timer_hops(report):
    data = timeline_data(report.view)
    [sleep, callback] = [g for g in gaps_of(data) if g["after"] == "waiting"]
    assert 2 * DAY_S <= sleep["seconds"] < 2 * DAY_S + 60
    assert [(w["kind"], w["name"]) for w in sleep["waited_for"]] == [("time", "cool-off")]
    assert sleep["hops"] == 191  # 2 days in SQS delays of at most 15 minutes
    assert sleep["woken_by"] == "timer"
    assert [(w["kind"], w["name"]) for w in callback["waited_for"]] == [("callback", "approve")]
    assert callback["waited_for"][0]["id"].startswith(f"{report.task_id}.")
    assert callback["woken_by"] == "wake"
    assert 3 * 3600 <= callback["seconds"] < 3 * 3600 + 60
    # A day-long gap does not stretch the scale the bars are drawn on.
    assert data["scale_s"] < 5


def test_a_crashed_invocation_is_drawn_to_its_last_known_moment_and_its_message_comes_back(
    report,
):
    data = timeline_data(report.view)
    rows = data["rows"]
    at = next(i for i, r in enumerate(rows) if r["kind"] == "run" and r["outcome"] == "crashed")
    crashed, after, retry = rows[at], rows[at + 1], rows[at + 2]
    assert crashed["duration_s"] is None  # its worker never wrote its end
    assert "died" in crashed["reason"]
    assert after["after"] == "crashed"
    assert after["seconds"] >= report.runtime.visibility_timeout_s
    assert retry["generation"] == crashed["generation"]  # the same continuation, again
    assert retry["steps"], "the retry fetched the page the dead worker was fetching"


def test_steps_sit_inside_their_invocation(report):
    for run in runs_of(timeline_data(report.view)):
        for step in run["steps"]:
            assert 0 <= step["at_s"] <= run["extent_s"]
            assert step["at_s"] + step["duration_s"] <= run["extent_s"] + 0.01


def test_every_checkpoint_is_on_the_row_of_the_invocation_or_the_wait_that_wrote_it(report):
    data = timeline_data(report.view)
    placed = [i for row in data["rows"] for i in row["checkpoints"]]
    assert sorted(placed) == list(range(len(data["checkpoints"])))
    for run in runs_of(data):
        for i in run["checkpoints"]:
            checkpoint = data["checkpoints"][i]
            if checkpoint["status"] == "running":  # a claim or a save: the run's generation
                assert checkpoint["generation"] == run["generation"]
            elif checkpoint["status"] != "pending":  # its end
                assert checkpoint["status"] == run["outcome"]
    sleep = next(g for g in gaps_of(data) if g["hops"])
    assert len(sleep["checkpoints"]) == sleep["hops"]  # each timer hop wrote the record once
    assert data["checkpoints"][-1]["status"] == "failed"
    assert data["checkpoints"][-1]["row"] == {"kind": "run", "number": len(runs_of(data))}


def test_a_waiting_task_ends_with_an_open_gap_naming_its_callback():
    waiting = live_ask()
    [tail] = [row for row in timeline_data(waiting.view)["rows"] if row.get("open")]
    assert tail["after"] == "waiting"
    [waiter] = tail["waited_for"]
    assert waiter["kind"] == "callback"
    assert waiter["id"] == waiting.view.waiting_for[0].id


def test_the_summary_counts_what_the_header_shows(report):
    summary = timeline_data(report.view)["summary"]
    assert summary["invocations"] == len(report.view.invocations)
    assert summary["crashes"] == 1
    assert summary["hops"] == 191
    assert summary["waited_s"] > 2 * DAY_S
    assert summary["span_s"] >= summary["waited_s"]


def test_the_data_cannot_close_its_script_block_and_stays_json():
    hostile = {"state": "</script><script>alert(1)</script><!-- & \u2028"}
    text = script_json(hostile)
    assert "<" not in text
    assert ">" not in text
    assert "&" not in text
    assert json.loads(text) == hostile


def test_the_page_is_self_contained_and_allows_only_its_own_style_and_script(report):
    page = timeline_page(report.view)
    assert not re.search(r"(?i)\b(src|href)\s*=", page)  # nothing to fetch
    assert "http://" not in page
    assert "https://" not in page
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert policy is not None
    assert policy.group(1).startswith("default-src 'none'; style-src 'sha256-")
    assert "form-action 'none'" in policy.group(1)
    assert PUBLISH_ERROR in page  # the data is in the page itself


def test_a_checkpoint_that_names_its_invocation_is_placed_by_it_whatever_the_clock_says(report):
    data = timeline_data(report.view)
    skewed = [
        c.model_copy(
            update={
                "saved_at": c.saved_at - timedelta(minutes=30),
                "invocation": placed["row"]["number"],
            }
        )
        for c, placed in zip(report.view.checkpoints, data["checkpoints"], strict=True)
    ]
    again = timeline_data(report.view.model_copy(update={"checkpoints": skewed}))
    assert [c["row"] for c in again["checkpoints"]] == [c["row"] for c in data["checkpoints"]]
