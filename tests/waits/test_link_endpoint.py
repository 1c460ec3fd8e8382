"""The callback link endpoint: a GET shows the request and changes nothing however often; a
form POST approves or denies, a JSON POST answers with its body, and the task wakes; a second
answer is 409 and the task keeps the first; an expired link 410; a tampered one 403, with
nothing read or written."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Any
from urllib.parse import urlencode

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from continuum._record.inbox_items import CallbackAnswer
from continuum._waits.link_endpoint import LinkEndpoint, handle_function_url_event

BASE = "https://links.example.test"
FORM = "application/x-www-form-urlencoded"


class Ask(BaseModel):
    title: str = "<script>alert(1)</script> & co"


def approval_app(timeout: float = 3600) -> Continuum:
    app = Continuum(signing_key="k2, k1", callback_url=BASE)

    @app.task(state=Ask)
    def publish(ctx: TaskContext[Ask]) -> Any:
        cb = ctx.create_callback("publish", timeout=timeout, request={"title": ctx.state.title})
        return {"answer": cb.result(), "url": cb.url}

    return app


def waiting_task(runtime: Any, app: Continuum) -> tuple[Any, str, str]:
    waiting = runtime.run("publish", {})
    [waiter] = app.client().status(waiting.task_id).waiting_for
    assert waiter.url is not None
    return runtime, waiting.task_id, waiter.url.removeprefix(BASE)


def snapshot(app: Continuum) -> dict[str, bytes]:
    store = app.records.store
    return {key: store.get(key).body for key in store.list_keys(app.records.prefix + "/")}


def test_a_get_shows_the_request_escaped_and_changes_nothing(make_runtime):
    app = approval_app()
    runtime = make_runtime(app)
    with runtime.time.running():
        _, task_id, path = waiting_task(runtime, app)
        endpoint = LinkEndpoint.of(app)
        before = snapshot(app)
        for _ in range(5):
            page = endpoint.handle("GET", path, "", b"")
            assert page.status == HTTPStatus.OK
            assert endpoint.handle("HEAD", path, "", b"").status == HTTPStatus.OK
        assert snapshot(app) == before
        assert app.client().status(task_id).status == Status.WAITING
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in page.body
    assert "<script" not in page.body
    assert "http" not in page.body.replace("http-equiv", "")
    assert f"<code>{task_id}</code>" in page.body  # the person sees which task asks
    assert 'value="approve"' in page.body
    assert 'value="deny"' in page.body
    headers = page.all_headers()
    assert headers["Cache-Control"] == "no-store"
    assert headers["Referrer-Policy"] == "no-referrer"
    assert headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert "unsafe-inline" not in headers["Content-Security-Policy"]


def test_a_form_post_approves_and_wakes_the_task(make_runtime):
    app = approval_app()
    runtime = make_runtime(app)
    with runtime.time.running():
        _, task_id, path = waiting_task(runtime, app)
        endpoint = LinkEndpoint.of(app)
        body = urlencode({"decision": "approve", "comment": "ship it"}).encode()
        answered = endpoint.handle("POST", path, FORM, body)
        assert answered.status == HTTPStatus.OK
        assert "approved" in answered.body
        again = endpoint.handle("POST", path, FORM, urlencode({"decision": "deny"}).encode())
        assert again.status == HTTPStatus.CONFLICT
        assert endpoint.handle("GET", path, "", b"").status == HTTPStatus.CONFLICT
        done = runtime.drive(task_id)
    assert done.status == Status.SUCCEEDED
    assert done.result["answer"] == {"approved": True, "comment": "ship it"}


def test_a_json_post_answers_with_its_body(make_runtime):
    app = approval_app()
    runtime = make_runtime(app)
    with runtime.time.running():
        _, task_id, path = waiting_task(runtime, app)
        endpoint = LinkEndpoint.of(app)
        hook = endpoint.handle("POST", path, "application/json", b'{"status": "merged"}')
        assert hook.status == HTTPStatus.OK
        assert json.loads(hook.body) == {"ok": True}
        second = endpoint.handle("POST", path, "application/json", b'{"status": "closed"}')
        assert second.status == HTTPStatus.CONFLICT
        assert "already" in json.loads(second.body)["error"]
        done = runtime.drive(task_id)
    assert done.result["answer"] == {"status": "merged"}


def test_a_tampered_token_is_refused_and_changes_nothing(make_runtime):
    app = approval_app()
    runtime = make_runtime(app)
    with runtime.time.running():
        _, task_id, path = waiting_task(runtime, app)
        endpoint = LinkEndpoint.of(app)
        before = snapshot(app)
        token = path.removeprefix("/cb/")
        for i in range(0, len(token), 7):
            tampered = token[:i] + ("A" if token[i] != "A" else "B") + token[i + 1 :]
            for method in ("GET", "POST"):
                body = urlencode({"decision": "approve"}).encode()
                refused = endpoint.handle(method, "/cb/" + tampered, FORM, body)
                assert refused.status in (HTTPStatus.FORBIDDEN, HTTPStatus.NOT_FOUND), i
        bare = task_id + "." + "0" * 32  # a bare callback id is no link
        assert endpoint.handle("GET", "/cb/" + bare, "", b"").status == HTTPStatus.FORBIDDEN
        other_key = LinkEndpoint(app.records, app.continuations, ("someone-else",))
        assert other_key.handle("GET", path, "", b"").status == HTTPStatus.FORBIDDEN
        assert snapshot(app) == before
        assert endpoint.handle("GET", "/elsewhere", "", b"").status == HTTPStatus.NOT_FOUND


def test_an_expired_link_is_gone(make_runtime):
    app = approval_app(timeout=60)
    runtime = make_runtime(app)
    with runtime.time.running():
        _, task_id, path = waiting_task(runtime, app)
        endpoint = LinkEndpoint.of(app)
        runtime.time.advance(61)
        body = urlencode({"decision": "approve"}).encode()
        assert endpoint.handle("POST", path, FORM, body).status == HTTPStatus.GONE
        assert endpoint.handle("GET", path, "", b"").status == HTTPStatus.GONE
        done = runtime.drive(task_id)
    assert done.status == Status.FAILED
    assert "before its timeout" in str(done.error)


def test_an_answer_after_the_task_took_the_timeout_is_gone(make_runtime):
    app = approval_app(timeout=60)
    runtime = make_runtime(app)
    with runtime.time.running():
        _, task_id, path = waiting_task(runtime, app)
        done = runtime.drive(task_id, stop_when_waiting=False)  # the task takes the timeout
        endpoint = LinkEndpoint.of(app)
        late = endpoint.handle("POST", path, "application/json", b"true")
    assert done.status == Status.FAILED
    assert late.status == HTTPStatus.GONE


@pytest.mark.parametrize(
    ("content_type", "body", "status"),
    [
        (FORM, b"decision=maybe", HTTPStatus.UNPROCESSABLE_ENTITY),
        ("application/json", b"{not json", HTTPStatus.UNPROCESSABLE_ENTITY),
        ("text/plain", b"yes", HTTPStatus.UNSUPPORTED_MEDIA_TYPE),
        ("application/json", b'"' + b"x" * 300_000 + b'"', HTTPStatus.REQUEST_ENTITY_TOO_LARGE),
    ],
)
def test_bad_input_is_refused_and_writes_nothing(make_runtime, content_type, body, status):
    app = approval_app()
    runtime = make_runtime(app)
    with runtime.time.running():
        _, _, path = waiting_task(runtime, app)
        before = snapshot(app)
        assert LinkEndpoint.of(app).handle("POST", path, content_type, body).status == status
        assert snapshot(app) == before


def test_without_a_signing_key_the_endpoint_refuses_every_link(make_runtime):
    app = approval_app()
    runtime = make_runtime(app)
    with runtime.time.running():
        _, _, path = waiting_task(runtime, app)
        keyless = LinkEndpoint(app.records, app.continuations, ())
        assert keyless.handle("GET", path, "", b"").status == HTTPStatus.SERVICE_UNAVAILABLE


def test_a_function_url_event_round_trips(make_runtime):
    app = approval_app()
    runtime = make_runtime(app)
    with runtime.time.running():
        _, task_id, path = waiting_task(runtime, app)
        endpoint = LinkEndpoint.of(app)
        get = {
            "version": "2.0",
            "rawPath": path,
            "headers": {"accept": "text/html"},
            "requestContext": {"http": {"method": "GET", "path": path}},
            "isBase64Encoded": False,
        }
        page = handle_function_url_event(endpoint, get)
        assert page["statusCode"] == 200
        assert page["headers"]["Cache-Control"] == "no-store"
        import base64

        post = {
            **get,
            "headers": {"content-type": FORM},
            "requestContext": {"http": {"method": "POST", "path": path}},
            "body": base64.b64encode(b"decision=deny&comment=no").decode(),
            "isBase64Encoded": True,
        }
        assert handle_function_url_event(endpoint, post)["statusCode"] == 200
        done = runtime.drive(task_id)
    assert done.result["answer"] == {"approved": False, "comment": "no"}


def test_a_second_post_wakes_the_task_again_as_a_retried_webhook_must(make_runtime):
    app = approval_app()
    runtime = make_runtime(app)
    with runtime.time.running():
        _, task_id, path = waiting_task(runtime, app)
        # The first POST's answer landed and its wake was lost (its sender died).
        token = path.removeprefix("/cb/")
        [waiter] = app.client().status(task_id).waiting_for
        answer = CallbackAnswer(ok=True, result={"first": 1}, answered_at=datetime.now(UTC))
        assert app.records.inbox.put_answer(task_id, waiter.id.rpartition(".")[2], answer)
        endpoint = LinkEndpoint.of(app)
        assert endpoint.handle("GET", path, "", b"").status == HTTPStatus.CONFLICT
        assert runtime.invoke_once() is None  # a GET sends nothing
        retried = endpoint.handle("POST", "/cb/" + token, "application/json", b'{"first": 1}')
        assert retried.status == HTTPStatus.CONFLICT
        assert runtime.invoke_once() is not None  # the wake
        done = runtime.drive(task_id)
    assert done.result["answer"] == {"first": 1}
