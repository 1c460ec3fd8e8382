"""The dev UI's answer box: it shows what a callback asks, offers its ready answers as buttons
that send them, and a wrong answer typed in is refused on the page saying what is expected."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum.timeline.server import TimelineServer
from tests.support import LocalRuntime

ANSWERS = {"approve": {"approved": True, "digest": "d-1"}, "deny": {"approved": False}}
EXPECTS = {
    "oneOf": [
        {"properties": {"approved": {"const": True}, "digest": {"const": "d-1"}},
         "required": ["approved", "digest"], "type": "object"},
        {"properties": {"approved": {"const": False}}, "required": ["approved"], "type": "object"},
    ]
}  # fmt: skip


class Refund(BaseModel):
    order: str


@dataclass
class Page:
    runtime: LocalRuntime
    server: TimelineServer
    task_id: str

    @property
    def url(self) -> str:
        return f"{self.server.url}tasks/{self.task_id}"

    def waiter(self) -> Any:
        [waiter] = self.runtime.app.client().status(self.task_id).waiting_for
        return waiter


@pytest.fixture
def page(quiet) -> Iterator[Page]:
    app = Continuum()

    @app.step
    def hand_out(callback_id: str) -> None: ...

    @app.task(state=Refund)
    def refund(ctx: TaskContext[Refund]) -> Any:
        asks = {"tool": "refund", "args": {"order": ctx.state.order}}
        asks |= {"answers": ANSWERS, "expects": EXPECTS}
        return ctx.wait_for_callback(hand_out, name="approve.refund", request=asks)

    runtime = LocalRuntime(app, budget_s=5, backend="memory", virtual_time=True)
    with runtime.time.running():
        runtime.run("refund", {"order": "A-1"}, task_id="refund-1")
        with TimelineServer(runtime.app.client()) as server:
            yield Page(runtime, server, "refund-1")


def test_the_answer_box_shows_what_the_callback_asks_and_a_button_per_ready_answer(page, browser):
    browser.open(page.url)
    shown = browser.evaluate(
        "({asks: JSON.parse(document.querySelector('#waits .asks pre').textContent),"
        " buttons: [...document.querySelectorAll('#waits form.ready-answer button')]"
        "   .map((b) => b.textContent),"
        " sends: [...document.querySelectorAll('#waits form.ready-answer [name=result]')]"
        "   .map((i) => JSON.parse(i.value)),"
        " placeholder: document.querySelector('form.complete-callback textarea').placeholder})"
    )
    assert shown["asks"] == {"tool": "refund", "args": {"order": "A-1"}}
    assert shown["buttons"] == ["Approve", "Deny"]
    assert shown["sends"] == [ANSWERS["approve"], ANSWERS["deny"]]
    assert shown["placeholder"] != "null"
    assert browser.violations() == []


@pytest.mark.parametrize("button", ["approve", "deny"])
def test_each_button_sends_its_answer_and_the_task_takes_it(page, browser, button):
    browser.open(page.url)
    browser.submit(f"form.ready-{button}")
    assert browser.evaluate("location.search") == "?done=callback"
    done = page.runtime.drive(page.task_id)
    assert (done.status, done.result) == ("succeeded", ANSWERS[button])


def test_a_wrong_answer_typed_in_is_refused_on_the_page_saying_what_is_expected(page, browser):
    browser.open(page.url)
    browser.submit("form.complete-callback", result='{"approved": true}')
    notice = browser.evaluate("document.querySelector('#notice').textContent")
    assert "does not take this answer" in notice
    assert "answer lacks 'digest'" in notice
    assert '"digest": "d-1"' in notice
    assert page.runtime.app.client().status(page.task_id).status == "waiting"
    assert page.runtime.invoke_once() is None  # nothing was written, nothing woke the task


def test_the_waits_box_links_each_callback_as_its_status_does(quiet, browser):
    app = Continuum(signing_key="k", callback_url="https://links.example.test")

    @app.task(state=Refund)
    def refund(ctx: TaskContext[Refund]) -> Any:
        return ctx.create_callback("approve.refund", request={"order": ctx.state.order}).result()

    runtime = LocalRuntime(app, budget_s=5, backend="memory", virtual_time=True)
    with runtime.time.running():
        runtime.run("refund", {"order": "A-2"}, task_id="refund-2")
        [waiter] = app.client().status("refund-2").waiting_for
        with TimelineServer(app.client()) as server:
            browser.open(f"{server.url}tasks/refund-2")
            links = browser.evaluate(
                "[...document.querySelectorAll('#waits a.callback-link')].map((a) => a.href)"
            )
    assert waiter.url is not None
    assert links == [waiter.url]
