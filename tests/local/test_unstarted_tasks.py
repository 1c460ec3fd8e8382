"""A task that never ran does not look like one about to run: ``status().hint`` says that a
worker refused a message naming it (and why), or that none has started it for a minute, and how
to mend it. The worker's note is written beside the record of a pending task only: a refused
message for a task that runs or ran changes nothing."""

from __future__ import annotations

from datetime import timedelta

from freezegun import freeze_time
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from continuum._ops.client import Client
from continuum._ops.inspection import inspect_task
from continuum._ops.status import UNTAKEN_START_S
from continuum._record.continuation import Continuations
from continuum.testing import TaskRunner


class Ask(BaseModel):
    title: str = "tides"


def app_with_a_key() -> Continuum:
    app = Continuum(signing_key="the-workers-key")

    @app.task(state=Ask)
    def ask(ctx: TaskContext[Ask]) -> str:
        return ctx.state.title

    return app


def unsigned_client(app: Continuum) -> Client:
    """A client without the workers' key (the second terminal without the export line)."""
    client = app.client()
    client.continuations = Continuations(client.continuations.queue)
    return client


def test_a_fresh_start_has_no_hint_and_one_untaken_for_a_minute_says_what_to_check():
    app = app_with_a_key()
    with TaskRunner(app, virtual_time=False) as runner:
        task = runner.start("ask", {})  # never run: no worker takes its message
        assert runner.client.status(task.task_id).hint is None
        later = runner.now + timedelta(seconds=UNTAKEN_START_S + 5)
        with freeze_time(later):
            hint = runner.client.status(task.task_id).hint
    assert hint is not None
    assert hint.startswith("no worker has started this task in the 65 s since it was created")
    assert "may still wait in the queue" in hint  # a signed start still queued is not lost
    assert "'rejected a message'" in hint
    assert hint.endswith(f"is harmless): continuum resume {task.task_id}")


def test_a_start_the_worker_refused_says_why_and_how_to_mend_it():
    app = app_with_a_key()
    with TaskRunner(app) as runner:
        task_id = unsigned_client(app).start("ask", {})
        runner.settle()
        status = runner.client.status(task_id)
        view = inspect_task(app.records, task_id, versions=0)
        app.client().resume(task_id)  # signed, as the hint says: it runs
        runner.settle()
        ended = runner.client.status(task_id)
    assert status.status == Status.PENDING
    assert status.hint is not None
    assert status.hint.startswith("a message naming this task was refused at ")
    assert "If this task was started by something without the worker's signing key" in status.hint
    assert "message is not signed, and this app requires signatures" in status.hint
    assert "CONTINUUM_SIGNING_KEY" in status.hint
    assert status.hint.endswith(f"continuum resume {task_id}")
    assert view.hint == status.hint
    assert (ended.status, ended.hint) == (Status.SUCCEEDED, None)


def test_a_refused_message_for_a_task_that_ran_or_never_was_writes_nothing():
    app = app_with_a_key()
    with TaskRunner(app) as runner:
        task = runner.run("ask", {})
        unsigned = unsigned_client(app)
        unsigned.resume(task.task_id)  # refused, and the task is not pending
        unsigned.continuations.send("no-such-task", generation=0, reason="start")
        runner.settle()
        assert app.records.inbox.start_refusal(task.task_id) is None
        assert task.status == Status.SUCCEEDED
        assert list(app.records.store.list_keys(f"{app.records.prefix}/no-such-task/")) == []


def test_a_child_waiting_pending_for_room_in_its_batch_has_no_hint():
    app = Continuum()

    @app.task(state=Ask)
    def held(ctx: TaskContext[Ask]) -> str:
        ctx.wait_for_signal("go")
        return ctx.state.title

    @app.task(state=Ask)
    def fan(ctx: TaskContext[Ask]) -> list[str]:
        batch = ctx.map_tasks("held", [{"title": "a"}, {"title": "b"}], max_concurrency=1)
        return batch.values()

    with TaskRunner(app) as runner:
        parent = runner.run("fan", {})
        runner.advance(UNTAKEN_START_S * 2)
        children = [t for t in runner.client.tasks() if t.parent == parent.task_id]
        pending = [t for t in children if t.status == Status.PENDING]
        assert len(pending) == 1  # the second, created for its turn after the first
        assert runner.client.status(pending[0].task_id).hint is None
