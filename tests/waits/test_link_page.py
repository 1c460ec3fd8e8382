"""What a callback link's page says to the person who answers it: who asks, what, until when,
and the answer buttons; a request of the documented shape (title, summary, fields, asked_by)
reads as a page, plain JSON as a definition list, never as a JSON dump; every string of a
request is escaped, and what is for machines (expects, answers, other keys) stays out of sight.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum._waits.link_endpoint import LinkEndpoint

BASE = "https://links.example.test"
XSS = '<img src=x onerror="alert(1)">'


class Ask(BaseModel):
    request: Any = None
    timeout_s: float | None = 3 * 86400


def page_of(make_runtime: Any, request: Any, timeout_s: float | None = 3 * 86400) -> str:
    app = Continuum(signing_key="k1", callback_url=BASE)

    @app.task(state=Ask)
    def expense_approval(ctx: TaskContext[Ask]) -> Any:
        cb = ctx.create_callback("approval", timeout=ctx.state.timeout_s, request=ctx.state.request)
        return cb.result()

    runtime = make_runtime(app)
    with runtime.time.running():
        waiting = runtime.run(
            "expense_approval", {"request": request, "timeout_s": timeout_s}, task_id="exp-1042"
        )
        [waiter] = app.client().status(waiting.task_id).waiting_for
        assert waiter.url is not None
        page = LinkEndpoint.of(app).handle("GET", waiter.url.removeprefix(BASE), "", b"")
    assert page.status == 200, page.body
    return page.body


SHAPED = {
    "title": "Refund order 1042",
    "summary": "The customer says the parcel never came.",
    "fields": {"Customer": "Ada Lovelace", "Amount": "$42.00", "Items": ["lamp", "cable"]},
    "asked_by": "Support agent",
    "ticket": "internal-7f3a",
}


def test_a_shaped_request_shows_title_summary_fields_who_asks_and_until_when(make_runtime):
    body = page_of(make_runtime, SHAPED)
    assert "<h1>Refund order 1042</h1>" in body
    assert "The customer says the parcel never came." in body
    assert "<dt>Customer</dt><dd>Ada Lovelace</dd>" in body
    assert "<dt>Amount</dt><dd>$42.00</dd>" in body
    assert "<li>lamp</li><li>cable</li>" in body
    assert "Support agent" in body
    assert "expense_approval" in body  # the task that asks
    assert "exp-1042" in body
    assert "UTC" in body  # the deadline, with its time zone
    assert 'datetime="' in body
    assert "in 3 days" in body
    assert "internal-7f3a" not in body  # a key outside the shape is for machines
    assert 'value="approve"' in body
    assert 'value="deny"' in body
    assert "{" not in body.split("</style>")[1]  # no JSON anywhere


def test_fields_given_as_label_value_pairs_keep_their_order(make_runtime):
    body = page_of(make_runtime, {"title": "Refund", "fields": [["Zeta", 1], ["Alpha", XSS]]})
    assert "<dt>Zeta</dt><dd>1</dd><dt>Alpha</dt><dd>&lt;img" in body


def test_the_deadline_shows_in_the_time_zone_the_request_names(make_runtime):
    body = page_of(make_runtime, {**SHAPED, "timezone": "Europe/Paris"})
    assert "CET" in body or "CEST" in body
    assert "UTC" in body


def test_a_request_without_a_deadline_says_there_is_none(make_runtime):
    body = page_of(make_runtime, SHAPED, timeout_s=None)
    assert "no deadline" in body


def test_plain_json_reads_as_a_definition_list_not_a_dump(make_runtime):
    body = page_of(make_runtime, {"expense": "ada: $42.00", "receipts": 2, "nested": {"a": True}})
    assert "<pre" not in body
    assert "<dt>expense</dt><dd>ada: $42.00</dd>" in body
    assert "<dt>receipts</dt><dd>2</dd>" in body
    assert "<dt>a</dt><dd>yes</dd>" in body
    assert '"expense"' not in body


def test_a_plain_string_request_is_a_paragraph(make_runtime):
    body = page_of(make_runtime, "Deploy v2 to production?")
    assert "<p>Deploy v2 to production?</p>" in body


def test_every_string_of_a_request_is_escaped(make_runtime):
    hostile = {
        "title": XSS,
        "summary": XSS,
        "asked_by": XSS,
        "fields": {XSS: XSS, "list": [XSS], "map": {XSS: XSS}},
    }
    body = page_of(make_runtime, hostile)
    assert "<img" not in body
    assert body.count("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;") >= 6
    plain = page_of(make_runtime, {XSS: XSS})
    assert "<img" not in plain


def test_the_deadline_is_read_from_the_callback_not_the_request(make_runtime):
    body = page_of(make_runtime, {**SHAPED, "deadline": "never"}, timeout_s=3600)
    assert "in 1 hour" in body
