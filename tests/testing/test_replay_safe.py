"""check_replay_safe: a task suspended after any of its live steps ends the same, each step once;
one that is not is named with the suspension point and the step where it went wrong."""

from __future__ import annotations

import itertools
import random
import time
import uuid
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import ConfigurationError, Continuum, NonDeterminismError, Status, TaskContext
from continuum.testing import Failure, ReplayDivergence, check_replay_safe
from tests.tally import TOTAL_STEPS, build
from tests.testing.apps import Empty, Order, shop


class Draws(BaseModel):
    turns: int = 2
    seen: list[Any] = []


def two_turns(between: Any) -> Continuum:
    """A task of two turns of three steps; ``between()`` runs between its 2nd and 3rd step."""
    app = Continuum()

    @app.step
    def fetch(turn: int, page: int) -> str:
        return f"t{turn}p{page}"

    @app.task(state=Draws)
    def pages(ctx: TaskContext[Draws]) -> list[Any] | None:
        s = ctx.state
        s.seen += [fetch(ctx.turn, 0), fetch(ctx.turn, 1)]
        s.seen.append(between())
        s.seen.append(fetch(ctx.turn, 2))
        return s.seen if ctx.turn + 1 >= s.turns else None

    return app


def test_a_deterministic_task_is_replay_safe_wherever_it_is_suspended():
    app, calls = build()  # the suite's own suspend-anywhere task: 4 turns of 3 steps
    report = check_replay_safe(app, "tally", {"label": "x"})
    assert report.status == Status.SUCCEEDED
    assert report.result["total"] > 0
    assert len(report.steps) == len(report.runs) == TOTAL_STEPS
    assert [run.k for run in report.runs] == list(range(1, TOTAL_STEPS + 1))
    assert (report.steps[4].key, report.steps[4].turn) == ("square#1", 1)
    assert all(run.suspended for run in report.runs[:-1])  # the last step ends the task
    assert "replay-safe" in str(report)
    # The steps ran for real once, in the uninterrupted run; the other runs were given its
    # results, as a replay is.
    assert sum(calls.values()) == TOTAL_STEPS


def test_steps_that_read_the_clock_or_draw_random_numbers_are_replay_safe():
    app = Continuum()

    @app.step
    def now() -> float:
        return time.time()

    @app.step
    def new_id() -> str:
        return uuid.uuid4().hex

    @app.step
    def roll() -> float:
        return random.random()

    @app.task(state=Empty)
    def stamped(ctx: TaskContext[Empty]) -> list[Any]:
        return [now(), new_id(), roll(), ctx.step(time.time)]  # what the one rule asks for

    assert len(check_replay_safe(app, "stamped", {}).runs) == 4


def test_random_between_steps_is_named_with_the_first_suspension_that_shows_it():
    with pytest.raises(ReplayDivergence) as caught:
        check_replay_safe(two_turns(random.random), "pages", {})
    error = caught.value
    # Suspended after fetch#0, the turn draws its number once, after the suspension: the same
    # in every run. Suspended after fetch#1, the number drawn is drawn again on re-entry.
    assert (error.k, error.after.key, error.after.turn) == (2, "fetch#1", 0)
    message = str(error)
    assert message.startswith(
        "task 'pages' is not replay-safe: suspended after its 2nd live step ('fetch#1' in "
        "turn 0) and continued in a fresh invocation, it returned ["
    )
    assert "where the uninterrupted run returned [" in message
    assert "move time, randomness and I/O into steps" in message


def test_reading_the_clock_between_steps_is_found_though_each_run_starts_at_the_same_time():
    # Each run starts at the same instant, and the clock moves only when something moves it:
    # the continuation after the forced suspension comes a second later, so whatever the turn
    # reads from the clock after that differs from what the uninterrupted run read.
    with pytest.raises(ReplayDivergence, match="suspended after its 1st live step") as caught:
        check_replay_safe(two_turns(lambda: time.time()), "pages", {})
    assert caught.value.reason.startswith("it returned ['t0p0', 't0p1', ")


def test_a_value_that_does_not_change_across_suspensions_is_fine_even_if_computed():
    assert check_replay_safe(two_turns(lambda: sum(range(10))), "pages", {}).result[2] == 45


def test_a_cache_outside_the_state_that_skips_steps_is_named_by_the_step_it_skipped():
    app = Continuum()
    visited: set[int] = set()  # lives as long as the process: a warm Lambda keeps it

    @app.step
    def fetch(page: int) -> int:
        return page

    @app.task(state=Empty)
    def cached(ctx: TaskContext[Empty]) -> int:
        total = 0
        for page in range(3):
            if page not in visited:
                visited.add(page)
                total += fetch(page)
        return total

    with pytest.raises(ReplayDivergence) as caught:
        check_replay_safe(app, "cached", {})
    assert caught.value.k == 1
    assert caught.value.reason == (
        "step 'fetch#0' in turn 0 was never called, though the uninterrupted run called it"
    )


def test_code_that_changes_each_time_the_turn_is_entered_fails_with_the_journals_error():
    app = Continuum()
    entered = itertools.count()

    @app.step
    def fetch(page: int) -> int:
        return page

    @app.step
    def fetch_again(page: int) -> int:
        return page

    @app.task(state=Empty)
    def alternating(ctx: TaskContext[Empty]) -> int:
        first = fetch if next(entered) % 2 == 0 else fetch_again
        return first(1) + fetch(2)

    with pytest.raises(ReplayDivergence) as caught:
        check_replay_safe(app, "alternating", {})
    assert caught.value.k == 1
    assert caught.value.reason.startswith(
        "it ended failed (NonDeterminismError: turn 0 called step 'fetch#0' where the journal "
        "recorded 'fetch_again#0'"
    )
    assert caught.value.reason.endswith("where the uninterrupted run returned 3")
    assert isinstance(caught.value.__cause__, NonDeterminismError)  # the traceback, too


def test_a_step_called_with_other_arguments_after_a_suspension_is_named():
    app = Continuum()

    @app.step
    def quote(item: str, nonce: float) -> str:
        return item

    @app.task(state=Empty)
    def shopping(ctx: TaskContext[Empty]) -> list[str]:
        nonce = random.random()  # the same value flows into two steps
        return [quote("kayak", nonce), quote("paddle", nonce)]

    with pytest.raises(ReplayDivergence) as caught:
        check_replay_safe(app, "shopping", {})
    assert caught.value.k == 1
    assert caught.value.reason.startswith("step 'quote#1' in turn 0 was called with [['paddle', ")
    assert "where the uninterrupted run called it with [['paddle', " in caught.value.reason


def test_a_task_that_waits_is_checked_with_the_answers_given_as_it_waits():
    app, _ = shop()
    report = check_replay_safe(
        app, "approve", {"item": "kayak"}, callbacks={"manager": {"approved": True}}
    )
    assert report.result == "shipped kayak #1"
    assert [step.key for step in report.steps] == ["reserve#0", "manager.submit#2", "ship#4"]

    report = check_replay_safe(app, "listen", {"wants": 2}, signals={"order": ["a", "b"]})
    assert report.result == ["a", "b"]
    assert [(step.turn, step.key, step.args) for step in report.steps] == [
        (0, "handle#1", ("a",)),
        (1, "handle#1", ("b",)),
    ]


def test_a_callback_failed_as_an_answer_fails_every_run_the_same_way():
    app, _ = shop()
    answers = {"manager": Failure("Rejected", "not this week")}
    report = check_replay_safe(app, "approve", {"item": "kayak"}, callbacks=answers)
    assert report.status == Status.FAILED
    assert [step.key for step in report.steps] == ["reserve#0", "manager.submit#2"]


def test_a_wait_without_an_answer_is_refused_naming_what_it_waits_for():
    app, _ = shop()
    with pytest.raises(ConfigurationError, match="waits for callback 'manager'") as caught:
        check_replay_safe(app, "approve", {"item": "kayak"})
    assert "callbacks={name: result" in str(caught.value)
    with pytest.raises(ConfigurationError, match="waits for signal 'order'"):
        check_replay_safe(app, "listen", {"wants": 2}, signals={"order": ["only one"]})


def test_a_retried_step_is_given_the_same_attempts_in_every_run():
    app = Continuum()
    attempts: list[int] = []

    @app.step(retries=2, backoff_s=0.0, retry_on=(ConnectionError,))
    def flaky() -> str:
        attempts.append(1)
        if len(attempts) % 3:  # fails twice, then works: every third call
            raise ConnectionError("try again")
        return "ok"

    @app.task(state=Empty)
    def calls(ctx: TaskContext[Empty]) -> str:
        return flaky()

    report = check_replay_safe(app, "calls", {})
    assert [step.attempt for step in report.steps] == [1, 2, 3]
    assert report.result == "ok"
    assert len(attempts) == 3  # only the uninterrupted run called the step


def test_the_check_leaves_random_and_the_app_as_it_found_them():
    app, _ = shop()
    app.configure(bucket="my-bucket", queue_url="https://sqs.example/q")
    random.seed(7)
    expected = random.random()
    random.seed(7)
    check_replay_safe(app, "listen", {"wants": 1}, signals={"order": [1]})
    assert random.random() == expected
    assert app._backends.config.store is None  # S3 again, not the check's store
    assert app._backends.config.bucket == "my-bucket"


def test_a_task_that_differs_without_any_suspension_is_told_apart():
    app = Continuum()

    @app.step
    def fetch(page: int) -> int:
        return page

    @app.task(state=Empty)
    def tagged(ctx: TaskContext[Empty]) -> str:
        return f"{fetch(1)}-{uuid.uuid4().hex}"  # a new id every run, suspended or not

    with pytest.raises(ReplayDivergence) as caught:
        check_replay_safe(app, "tagged", {})
    assert not caught.value.suspended  # its only step was its last: nothing to suspend
    assert "run again from the same start, with no suspension, it returned '1-" in str(caught.value)


def test_a_deterministic_task_with_approval_links_is_replay_safe():
    # A run suspended before the callback is made makes it a virtual second later than the
    # uninterrupted run: its link, which the submitter gets, must not differ for that.
    app = Continuum(callback_url="https://links.example.test", signing_key="k")
    links: list[str | None] = []

    @app.step
    def reserve(item: str) -> str:
        return f"{item} #1"

    @app.step
    def ask_manager(callback_id: str, url: str | None = None) -> None:
        links.append(url)

    @app.task(state=Order)
    def approve(ctx: TaskContext[Order]) -> str:
        reservation = reserve(ctx.state.item)
        again = reserve(ctx.state.item)
        answer = ctx.wait_for_callback(ask_manager, name="manager", timeout=3600)
        return f"shipped {reservation} {again}" if answer["approved"] else "declined"

    report = check_replay_safe(
        app, "approve", {"item": "kayak"}, callbacks={"manager": {"approved": True}}
    )
    assert report.result == "shipped kayak #1 kayak #1"
    (link,) = links  # the submitter ran once: every run called it with the same link
    assert link is not None
    assert link.startswith("https://links.example.test/cb/")
