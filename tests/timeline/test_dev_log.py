"""The dev log (``continuum worker --progress``, which ``continuum dev`` runs): one line for each
message that ran a task, none for a message that found nothing to do (a late wake of a task
that has finished, which comes back after its visibility timeout)."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum._local.shutdown import Shutdown
from continuum._local.standalone import QueueSource, QueueWorker
from continuum._record.continuation import schedule_fire_body
from continuum.backends.scheduler import SCHEDULED_TIME
from continuum.cli.worker import Progress
from continuum.testing import InMemoryContinuationQueue, InMemoryRecordStore

ARN = "arn:aws:sqs:us-east-1:123456789012:continuations"


class Count(BaseModel):
    n: int = 2
    done: int = 0


def test_a_late_message_for_a_finished_task_prints_nothing(capsys):
    queue = InMemoryContinuationQueue()
    app = Continuum(store=InMemoryRecordStore(), queue=queue)

    @app.step
    def tick(i: int) -> int:
        return i + 1

    @app.task(state=Count)
    def count(ctx: TaskContext[Count]) -> int:
        while ctx.state.done < ctx.state.n:
            ctx.state.done = tick(ctx.state.done)
        return ctx.state.done

    client = app.client()
    task_id = client.start("count", {}, task_id="count-1")
    shutdown = Shutdown()
    processed = []
    progress = Progress(client)

    def show(done):
        progress.show(done)
        processed.append(done)

    source = QueueSource("continuations", queue, ARN, app.handler, 60, slots=1)
    worker = QueueWorker([source], shutdown=shutdown, poll_wait_s=0, on_processed=show)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait(lambda: client.status(task_id).status.finished and len(processed) == 1)
        ran = capsys.readouterr().out
        # The same continuation again, as when it comes back after its visibility timeout.
        late = {"task_id": task_id, "generation": 0, "reason": "start", "sent_at": time.time()}
        queue.send(json.dumps(late))
        wait(lambda: len(processed) == 2)
    finally:
        shutdown.begin(grace_s=3, reason="test")
        thread.join(5)
    assert [line.split(" ", 1)[1] for line in ran.splitlines()] == [
        f"task {task_id} count: succeeded, turn 0, 1 invocations, 2 steps"
        f" [{processed[0].seconds:.2f}s]"
    ]
    assert capsys.readouterr().out == ""


def test_a_schedule_fire_is_shown_as_its_schedule_and_the_run_it_started(capsys):
    queue = InMemoryContinuationQueue()
    app = Continuum(store=InMemoryRecordStore(), queue=queue)

    @app.task(state=Count)
    def count(ctx: TaskContext[Count]) -> int:
        return ctx.state.n

    app.schedule("nightly", "count", every=timedelta(days=1))
    client = app.client()
    body = schedule_fire_body("nightly").replace(SCHEDULED_TIME, "2026-01-15T02:00:00Z")
    queue.send(body)
    run_id = "nightly-20260115T020000Z"
    processed = run_worker(app, queue, client, until=lambda done: len(done) == 2)
    lines = [line.split(" ", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == (
        f"schedule 'nightly' fired: task {run_id} count: pending, turn 0, 0 invocations, "
        f"0 steps [{processed[0].seconds:.2f}s]"
    )
    assert lines[1].startswith(f"task {run_id} count: succeeded")
    assert not any("names no task" in line for line in lines)


def test_a_failed_task_is_shown_with_the_traceback_of_the_code_that_raised(capsys):
    queue = InMemoryContinuationQueue()
    app = Continuum(store=InMemoryRecordStore(), queue=queue)

    @app.step
    def parse(text: str) -> int:
        return int(text)

    @app.task(state=Count)
    def count(ctx: TaskContext[Count]) -> int:
        return parse("zwei")

    client = app.client()
    client.start("count", {}, task_id="count-2")
    run_worker(app, queue, client, until=lambda done: len(done) == 1)
    out = capsys.readouterr().out
    assert "task count-2 count: failed" in out
    assert "\n    Traceback (most recent call last):" in out
    assert "        return int(text)" in out


def run_worker(app, queue, client, until):
    shutdown = Shutdown()
    processed = []
    progress = Progress(client)

    def show(done):
        progress.show(done)
        processed.append(done)

    source = QueueSource("continuations", queue, ARN, app.handler, 60, slots=1)
    worker = QueueWorker([source], shutdown=shutdown, poll_wait_s=0, on_processed=show)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        wait(lambda: until(processed))
    finally:
        shutdown.begin(grace_s=3, reason="test")
        thread.join(5)
    return processed


def wait(predicate, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
