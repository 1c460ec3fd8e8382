"""A callback carries its request once in the record, and, with a link endpoint configured, a
link: ``cb.url``, ``status().waiting_for[i].url`` and the submitter's ``url`` give the same,
signed and bound to that callback.

The tests with a task run in both flavours (``tests/waits/flavours.py``): the task ``def``, and
``async def`` with ``await ctx.wait_for_callback_async`` and an ``async def`` submitter that
takes the ``url``. The token's own tests have no task.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import ConfigurationError, Continuum, ContinuumError, TaskContext
from continuum._base.callback_links import (
    BadLinkToken,
    CallbackLinks,
    make_token,
    read_token,
)
from tests.waits.flavours import Flavour

BASE = "https://links.example.test"


class Ask(BaseModel):
    title: str = "tides"


def link_app(flavour: Flavour, **options: Any) -> tuple[Continuum, dict[str, Any]]:
    app = Continuum(**options)
    seen: dict[str, Any] = {}

    @flavour.step(app)
    def hand_out(callback_id: str, url: str | None = None) -> None:
        seen["id"], seen["submitted_url"] = callback_id, url

    def review(ctx: TaskContext[Ask]) -> Any:
        cb = ctx.create_callback(
            "review", timeout=3600, request={"title": ctx.state.title, "m": "asked-1"}
        )
        seen["url"] = cb.url
        return ctx.wait_for_callback(hand_out, name="second", timeout=60, request={"n": 2})

    async def review_async(ctx: TaskContext[Ask]) -> Any:
        cb = ctx.create_callback(
            "review", timeout=3600, request={"title": ctx.state.title, "m": "asked-1"}
        )
        seen["url"] = cb.url
        return await ctx.wait_for_callback_async(
            hand_out, name="second", timeout=60, request={"n": 2}
        )

    flavour.task(app, review, review_async, state=Ask)
    return app, seen


def test_the_request_is_stored_once_in_the_record(make_runtime, flavour):
    app, _ = link_app(flavour)
    runtime = make_runtime(app)
    with runtime.time.running():
        waiting = runtime.run("review", {"title": "a-unique-title-1234"})
        raw = app.records.store.get(app.records.record_key(waiting.task_id)).body.decode()
        status = app.client().status(waiting.task_id)
    assert raw.count('"asked-1"') == 1, raw
    assert raw.count('"n": 2') == 1, raw
    assert json.loads(raw)["waiting_for"][0].get("request") is None
    assert [w.request for w in status.waiting_for] == [
        {"n": 2},
        {"title": "a-unique-title-1234", "m": "asked-1"},
    ]


def test_without_an_endpoint_there_is_no_url(make_runtime, flavour):
    app, seen = link_app(flavour, signing_key="k")
    runtime = make_runtime(app)
    with runtime.time.running():
        waiting = runtime.run("review", {})
        status = app.client().status(waiting.task_id)
    assert seen["url"] is None
    assert seen["submitted_url"] is None
    assert [w.url for w in status.waiting_for] == [None, None]


def test_with_an_endpoint_each_callback_has_its_link(make_runtime, flavour):
    app, seen = link_app(flavour, signing_key="new, old", callback_url=BASE + "/")
    runtime = make_runtime(app)
    with runtime.time.running():
        waiting = runtime.run("review", {})
        status = app.client().status(waiting.task_id)
    second, first = status.waiting_for
    assert first.url == seen["url"]
    assert second.url == seen["submitted_url"]
    assert second.id == seen["id"]
    for waiter in (first, second):
        assert waiter.url is not None
        assert waiter.url.startswith(BASE + "/cb/v1.")
        claim = read_token(waiter.url.rpartition("/")[2], ("old", "new"))
        assert claim.callback_id == waiter.id
        assert waiter.deadline is not None
        assert claim.expires_at is None  # the endpoint reads the timeout from the record
    assert waiting.task_id not in (first.url or "")  # never a bare id
    raw = app.records.store.get(app.records.record_key(waiting.task_id)).body.decode()
    assert "/cb/" not in raw  # derived, not stored


def test_inspect_and_the_timeline_page_show_each_callback_link_the_status_shows(
    make_runtime, flavour
):
    from continuum._ops.inspection import inspect_task
    from continuum.cli.steer import render
    from continuum.timeline.model import timeline_data

    app, _ = link_app(flavour, signing_key="k", callback_url=BASE)
    runtime = make_runtime(app)
    with runtime.time.running():
        waiting = runtime.run("review", {})
        client = app.client()
        urls = [w.url for w in client.status(waiting.task_id).waiting_for]
        view = inspect_task(client.records, waiting.task_id, links=client.settings.links())
    assert all(urls)
    assert [w.url for w in view.waiting_for] == urls
    assert [w["url"] for w in timeline_data(view)["task"]["waiting_for"]] == urls
    text = render(view)
    assert all(f"link: {url}" in text for url in urls)


def test_the_environment_names_the_endpoint(make_runtime, monkeypatch, flavour):
    monkeypatch.setenv("CONTINUUM_CALLBACK_URL", BASE)
    app, seen = link_app(flavour, signing_key="k")
    runtime = make_runtime(app)
    with runtime.time.running():
        runtime.run("review", {})
    assert seen["url"].startswith(BASE + "/cb/")


def test_a_link_without_a_signing_key_is_a_clear_error(make_runtime, monkeypatch, flavour):
    monkeypatch.delenv("CONTINUUM_SIGNING_KEY", raising=False)
    app, _ = link_app(flavour, callback_url=BASE)
    runtime = make_runtime(app)
    with runtime.time.running():
        failed = runtime.run("review", {})
        status = app.client().status(failed.task_id)
    assert status.error is not None
    assert "callback links need a signing key" in status.error.message


def test_a_replayed_turn_gives_the_same_link(make_runtime, flavour):
    app = Continuum(signing_key="k", callback_url=BASE)
    urls: list[str | None] = []

    def twice(ctx: TaskContext[Ask]) -> Any:
        cb = ctx.create_callback("once", timeout=100)
        urls.append(cb.url)
        return cb.result()

    async def twice_async(ctx: TaskContext[Ask]) -> Any:
        cb = ctx.create_callback("once", timeout=100)
        urls.append(cb.url)
        return cb.result()

    flavour.task(app, twice, twice_async, state=Ask)

    runtime = make_runtime(app)
    with runtime.time.running():
        waiting = runtime.run("twice", {})
        [waiter] = app.client().status(waiting.task_id).waiting_for
        assert waiter.id is not None
        app.client().complete_callback(waiter.id, "yes")
        done = runtime.drive(waiting.task_id)
    assert done.result == "yes"
    assert len(urls) == 2
    assert urls[0] == urls[1] == waiter.url


def test_a_bad_request_is_a_clear_error_naming_the_task(make_runtime):
    app = Continuum()

    @app.task(state=Ask)
    def bad(ctx: TaskContext[Ask]) -> Any:
        return ctx.create_callback("big", request={"x": "y" * 20_000}).result()

    runtime = make_runtime(app)
    with runtime.time.running():
        failed = runtime.run("bad", {})
    status = app.client().status(failed.task_id)
    assert status.error is not None
    assert "request of callback 'big'" in status.error.message


# -- the token --------------------------------------------------------------------------------


def test_a_token_is_bound_to_its_callback_and_holds_no_time():
    token = make_token("k", "task-1", "a" * 32)
    claim = read_token(token, ("k",))
    assert (claim.task_id, claim.token, claim.expires_at) == ("task-1", "a" * 32, None)
    assert not claim.expired(10**12)
    assert make_token("k", "task-1", "a" * 32) == token  # the same link whenever it is made


def test_a_link_an_earlier_version_made_with_its_expiry_still_expires():
    token = make_token("k", "task-1", "a" * 32, expires_at=1000.2)
    claim = read_token(token, ("k",))
    assert (claim.task_id, claim.token, claim.expires_at) == ("task-1", "a" * 32, 1001)
    assert claim.expired(1001)
    assert not claim.expired(1000.9)


@pytest.mark.parametrize("keys", [("other",), ()])
def test_a_token_no_key_verifies_is_refused(keys):
    with pytest.raises(BadLinkToken):
        read_token(make_token("k", "task-1", "a" * 32), keys)


def test_rotation_the_first_key_signs_and_any_verifies():
    links = CallbackLinks(BASE, ("new", "old"))
    token = links.url("t", "b" * 32).rpartition("/")[2]
    assert read_token(token, ("new",)).task_id == "t"
    with pytest.raises(BadLinkToken):
        read_token(token, ("old",))
    assert read_token(make_token("old", "t", "b" * 32), ("new", "old")).task_id == "t"


def test_every_changed_character_of_a_token_is_refused():
    token = make_token("k", "task-1", "c" * 32, expires_at=5000)
    for i, char in enumerate(token):
        for other in {"A", "b", "0", "-", ".", "é"} - {char}:
            tampered = token[:i] + other + token[i + 1 :]
            with pytest.raises(BadLinkToken):
                read_token(tampered, ("k",))
    for tampered in ("", "v1", token + "x", "v2" + token[2:], "x" * 5000):
        with pytest.raises(BadLinkToken):
            read_token(tampered, ("k",))


def test_a_link_needs_a_signing_key():
    with pytest.raises(ConfigurationError, match="need a signing key"):
        CallbackLinks(BASE, ()).url("t", "d" * 32)
    assert issubclass(ConfigurationError, ContinuumError)
