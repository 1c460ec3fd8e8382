"""The dev server's pages: the task list, each task's timeline, and buttons that steer it.

The server runs here in a thread over a local runtime's in-memory records; the browser tests
click as a person would, the others post as another site or a mistaken person would.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from continuum.timeline.server import TimelineServer
from tests.timeline.tasks import Lived, live_ask


@dataclass
class Served:
    lived: Lived
    server: TimelineServer

    @property
    def task_url(self) -> str:
        return f"{self.server.url}tasks/{self.lived.task_id}"

    def status(self):
        return self.lived.runtime.app.client().status(self.lived.task_id)

    def callback_id(self) -> str:
        [waiter] = [w for w in self.status().waiting_for if w.kind == "callback"]
        return waiter.id

    def drive(self):
        return self.lived.runtime.drive(self.lived.task_id)


@pytest.fixture
def served(quiet) -> Iterator[Served]:
    """``ask-1`` waiting for its callback, and ``tally-1`` done, on one dev server."""
    lived = live_ask()
    # On the runtime's virtual clock throughout, so that what the server sends is due at
    # once for the runtime too (freezegun moves every thread's clock).
    with lived.runtime.time.running():
        lived.runtime.run("tally", {"n": 2}, task_id="tally-1")
        with TimelineServer(lived.runtime.app.client()) as server:
            yield Served(lived, server)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def post(url: str, fields: dict[str, str], **headers: str) -> tuple[int, str, str | None]:
    """POST a form as a browser would; (status, body, Location)."""
    body = urllib.parse.urlencode(fields).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    request.add_header("Content-Type", "application/x-www-form-urlencoded")
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=10) as reply:
            return reply.status, reply.read().decode(), reply.headers.get("Location")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), exc.headers.get("Location")


def get(url: str, **headers: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# -- in the browser ------------------------------------------------------------------------------


def test_the_task_list_shows_each_task_and_a_button_for_the_callback_it_waits_for(served, browser):
    browser.open(served.server.url)
    rows = browser.evaluate(
        "[...document.querySelectorAll('tr.task')].map((tr) => ({id: tr.dataset.taskId,"
        " status: tr.querySelector('.status').textContent,"
        " waits: tr.querySelector('.waiter')?.textContent ?? null,"
        " answer: tr.querySelector('a.answer')?.getAttribute('href') ?? null}))"
    )
    assert {r["id"]: r["status"] for r in rows} == {"ask-1": "waiting", "tally-1": "succeeded"}
    [ask] = [r for r in rows if r["id"] == "ask-1"]
    assert ask["waits"].startswith("waits for callback 'approve'")
    assert ask["answer"] == "/tasks/ask-1#waits"
    browser.evaluate("document.querySelector('tr.task[data-task-id=\"ask-1\"] a').click()")
    browser.wait_for_event("Page.loadEventFired")
    assert browser.evaluate("document.querySelector('h1').textContent").startswith("ask-1")


def test_completing_the_callback_on_the_task_page_wakes_the_task_with_the_result(served, browser):
    browser.open(served.task_url)
    shown = browser.evaluate(
        "({id: document.querySelector('#waits code.callback-id').textContent,"
        " field: document.querySelector('form.complete-callback [name=callback_id]').value,"
        " button: document.querySelector('form.complete-callback button').textContent})"
    )
    assert shown == {"id": served.callback_id(), "field": served.callback_id(),
                     "button": "Complete callback"}  # fmt: skip
    browser.submit("form.complete-callback", result='{"approved": true}')
    assert browser.evaluate("location.search") == "?done=callback"
    assert "Callback completed" in browser.evaluate("document.querySelector('#notice').textContent")
    done = served.drive()
    assert (done.status, done.result) == ("succeeded", {"approved": True})
    assert browser.violations() == []


def test_a_result_that_is_not_json_is_an_error_on_the_page_and_changes_nothing(served, browser):
    browser.open(served.task_url)
    browser.submit("form.complete-callback", result="{approved: yes}")
    notice = browser.evaluate(
        "({kind: document.querySelector('#notice').className,"
        " text: document.querySelector('#notice').textContent})"
    )
    assert notice["kind"] == "notice notice-error"
    assert notice["text"].startswith("Could not complete the callback: the result is not JSON")
    assert "Traceback" not in notice["text"]
    assert served.status().status == "waiting"
    kept = browser.evaluate("document.querySelector('form.complete-callback textarea').value")
    assert kept == "{approved: yes}"  # to fix, and send again


# -- what the server refuses ---------------------------------------------------------------------


def test_a_post_without_this_servers_token_is_refused_and_changes_nothing(served):
    fields = {"callback_id": served.callback_id(), "result": "1"}
    for token in ({}, {"token": "guessed"}):
        status, body, _ = post(f"{served.task_url}/callback", {**fields, **token})
        assert status == 403
        assert "token" in body
    assert served.status().status == "waiting"
    assert served.drive().status == "waiting"  # no answer arrived


def test_a_post_from_another_site_or_to_another_host_name_is_refused(served):
    fields = {"token": served.server.token, "reason": "forged"}
    url = f"{served.task_url}/cancel"
    assert post(url, fields, Origin="http://evil.example")[0] == 403
    assert post(url, fields, **{"Sec-Fetch-Site": "cross-site"})[0] == 403
    assert post(url, fields, Host=f"evil.example:{served.server.port}")[0] == 403  # rebinding
    assert get(served.task_url, Host=f"evil.example:{served.server.port}")[0] == 403
    assert served.status().status == "waiting"


def test_an_unknown_callback_a_bad_name_and_a_finished_task_are_clear_errors(served):
    token = served.server.token
    other = "ask-1." + "0" * 32
    status, body, _ = post(f"{served.task_url}/callback", {"token": token, "callback_id": other})
    assert status == 400
    assert "unknown callback id" in body
    status, body, _ = post(f"{served.task_url}/signal", {"token": token, "name": "no spaces"})
    assert (status, "is not a valid name" in body) == (400, True)
    url = f"{served.server.url}tasks/tally-1/cancel"
    status, body, _ = post(url, {"token": token})
    assert status == 400
    assert "succeeded" in body
    assert "Traceback" not in body


def test_unknown_pages_and_tasks_are_not_found(served):
    assert get(f"{served.server.url}tasks/nobody")[0] == 404
    assert get(f"{served.server.url}tasks/..%2Fsecrets")[0] == 404
    assert get(f"{served.server.url}elsewhere")[0] == 404
    assert post(f"{served.task_url}/delete", {"token": served.server.token})[0] == 404


# -- signals and cancel --------------------------------------------------------------------------


def test_a_signal_sent_from_the_page_reaches_the_task_that_waits_for_it(quiet):
    lived = live_ask(task="hold", task_id="hold-1")
    with lived.runtime.time.running(), TimelineServer(lived.runtime.app.client()) as server:
        url = f"{server.url}tasks/hold-1"
        _, page = get(url)
        assert '"name":"go"' in page  # the signal it waits for, to fill the form
        fields = {"token": server.token, "name": "go", "payload": '{"n": 3}'}
        status, _, location = post(f"{url}/signal", fields)
        assert (status, location) == (303, "/tasks/hold-1?done=signal")
        done = lived.runtime.drive("hold-1")
    assert (done.status, done.result) == ("succeeded", {"n": 3})


def test_cancel_from_the_page_cancels_the_task_with_the_reason(served):
    fields = {"token": served.server.token, "reason": "changed my mind"}
    status, _, location = post(f"{served.task_url}/cancel", fields)
    assert (status, location) == (303, "/tasks/ask-1?done=cancel")
    assert served.drive().status == "cancelled"
    _, page = get(served.task_url)
    assert "changed my mind" in page


def test_retry_of_a_task_that_did_not_fail_is_a_clear_error_and_changes_nothing(served):
    before = served.lived.runtime.app.client().status("tally-1")
    url = f"{served.server.url}tasks/tally-1/retry"
    status, body, _ = post(url, {"token": served.server.token})
    assert status == 400
    assert "Could not retry the task" in body
    assert "Traceback" not in body
    assert post(url, {"token": "wrong"})[0] == 403
    assert served.lived.runtime.app.client().status("tally-1") == before


def test_a_finished_task_page_has_no_buttons(served, browser):
    browser.open(f"{served.server.url}tasks/tally-1")
    assert browser.evaluate("document.querySelectorAll('form').length") == 0
    assert browser.evaluate("document.querySelector('#status').textContent") == "succeeded"


def test_the_written_page_has_no_buttons_even_for_a_waiting_task(quiet, browser, tmp_path):
    from continuum.timeline import timeline_page

    page = tmp_path / "ask.html"
    page.write_text(timeline_page(live_ask().view))
    browser.open(page.as_uri())
    assert browser.evaluate("document.querySelectorAll('form').length") == 0
    assert browser.evaluate("document.querySelector('#waits code.callback-id') !== null")


def test_a_kind_of_wait_the_registry_lists_with_an_action_is_answered_through_its_send(
    served, monkeypatch
):
    from typing import Any, ClassVar

    from continuum._waits.kinds import registry
    from continuum._waits.kinds.template import WaitOperation

    sent: list[tuple[str, str, Any]] = []

    class WebhookWait(WaitOperation):
        kind: ClassVar[str] = "webhook"
        event: ClassVar[str] = "webhook"
        outside: ClassVar[bool] = True
        action: ClassVar[str | None] = "post the webhook"

        def send(self, mail, task_id, waiter, payload, *, answer_id):
            sent.append((task_id, waiter.name, payload))

    monkeypatch.setitem(registry.KINDS, "webhook", WebhookWait())
    token = served.server.token
    fields = {"token": token, "name": "deploy", "payload": '{"sha": "abc"}'}
    status, _, where = post(f"{served.task_url}/webhook", fields)
    assert (status, sent) == (303, [("ask-1", "deploy", {"sha": "abc"})])
    assert get(f"{served.server.url}{where.lstrip('/')}")[1].count("Answer sent") == 1
    status, body, _ = post(f"{served.task_url}/webhook", {**fields, "payload": "{no"})
    assert (status, "Could not post the webhook: the payload is not JSON" in body) == (400, True)
    page = get(served.task_url)[1]
    assert '"answers":{"callback":"complete the callback","webhook":"post the webhook"}' in page
