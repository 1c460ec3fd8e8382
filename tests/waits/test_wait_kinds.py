"""Wait kinds are modules on one template, listed in one registry: code around the waits looks
a kind up, it does not switch on it, so a new kind is one module and a line in the registry."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from continuum import WaitKind
from continuum._record.inbox import Listing
from continuum._record.waiting_for import OpenCallback, Waiter
from continuum._waits.kinds import registry
from continuum._waits.kinds.callback_wait import heard
from continuum._waits.kinds.template import WaitOperation

PACKAGE = Path(__file__).resolve().parents[2] / "continuum"
KINDS = PACKAGE / "_waits" / "kinds"
SWITCH = re.compile(r"kind\s*(==|!=|in|not in)\s*\(?\{?\s*WaitKind\.|WaitKind\.\w+\s+(not )?in ")


def test_every_wait_kind_is_one_module_in_the_registry():
    for kind in WaitKind:
        operation = registry.operation_of(kind)
        assert isinstance(operation, WaitOperation)
        assert operation.kind == kind
        module = Path(__import__(type(operation).__module__, fromlist=["x"]).__file__ or "")
        assert module.parent == KINDS, f"{kind}: {module}"


def test_no_code_switches_on_a_wait_kind_outside_the_kinds():
    switches = [
        f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if KINDS not in path.parents
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SWITCH.search(line)
    ]
    assert not switches, "\n".join(switches)


def test_an_unknown_kind_from_a_newer_record_is_never_answered_and_shown_as_it_is():
    operation = registry.operation_of("a-kind-of-a-newer-version")
    assert not operation.outside
    assert operation.recheck_s is None


def test_a_heartbeat_moves_a_callback_only_when_newer_than_the_one_kept():
    at = datetime(2026, 1, 1, tzinfo=UTC)
    later = datetime(2026, 1, 2, tzinfo=UTC)
    callback = OpenCallback(
        key="c", name="c", created_at=at, heartbeat_timeout_s=60.0, heartbeat_at=later
    )
    listing = Listing(frozenset({"heartbeats/t.json"}))
    assert not heard(callback, "t", listing, lambda token: at)
    assert callback.heartbeat_at == later
    newest = datetime(2026, 1, 3, tzinfo=UTC)
    assert heard(callback, "t", listing, lambda token: newest)
    assert callback.heartbeat_at == newest
    assert not heard(callback, "t", Listing(), lambda token: datetime(2027, 1, 1, tzinfo=UTC))


def test_a_waiter_of_a_known_kind_loads_as_its_member_and_another_kind_as_its_value():
    known = Waiter.model_validate_json('{"kind": "callback", "name": "a"}')
    assert known.kind is WaitKind.CALLBACK
    other = Waiter.model_validate_json('{"kind": "a-kind-of-a-newer-version", "name": "a"}')
    assert other.kind == "a-kind-of-a-newer-version"


def test_a_wait_kinds_module_uses_of_the_turn_only_what_its_caller_offers():
    reaching = re.compile(r"\bcaller\.state\b|\.scope\.|\bTurnState\b")
    for module in sorted(KINDS.glob("*_wait.py")):
        for number, line in enumerate(module.read_text().splitlines(), 1):
            assert not reaching.search(line), f"{module.name}:{number}: {line.strip()}"


def test_send_to_wait_answers_what_the_task_waits_for_through_its_kind_and_names_the_rest(
    make_runtime,
):
    import pytest

    from continuum import Continuum, ContinuumError, TaskContext
    from tests.waits.test_signals import Inbox

    app = Continuum()

    @app.task(state=Inbox)
    def listen(ctx: TaskContext[Inbox]) -> object:
        signal = ctx.wait_for_signal("go")
        return ctx.create_callback("ok").result() if signal else None

    runtime = make_runtime(app)
    client = app.client()
    with runtime.time.running():
        task_id = client.start("listen", {})
        runtime.drive(task_id)
        with pytest.raises(ContinuumError, match=r"waits for no signal 'stop' now .*signal 'go'"):
            client.send_to_wait(task_id, "signal", "stop", 1)
        client.send_to_wait(task_id, "signal", "go", 1)
        runtime.drive(task_id)
        client.send_to_wait(task_id, "callback", "ok", {"done": True})
        done = runtime.drive(task_id)
    assert (done.status, done.result) == ("succeeded", {"done": True})
