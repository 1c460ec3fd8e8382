"""The worker outside Lambda, on the in-memory queue: what it deletes, releases and keeps."""

from __future__ import annotations

import json
import threading
import time

from botocore.exceptions import ClientError
from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum._local.shutdown import Shutdown
from continuum._local.standalone import QueueSource, QueueWorker
from continuum.backends.queue import QueueError
from continuum.testing import InMemoryContinuationQueue, InMemoryRecordStore

ARN = "arn:aws:sqs:us-east-1:123456789012:continuations"


class Steps(BaseModel):
    n: int
    done: int = 0


def memory_app() -> tuple[Continuum, InMemoryContinuationQueue]:
    queue = InMemoryContinuationQueue()
    app = Continuum(store=InMemoryRecordStore(), queue=queue)

    @app.step
    def work(i: int) -> int:
        return i + 1

    @app.task(state=Steps)
    def steps(ctx: TaskContext[Steps]) -> int | None:
        ctx.state.done = work(ctx.state.done)
        return ctx.state.done if ctx.state.done >= ctx.state.n else None

    return app, queue


def in_background(worker: QueueWorker) -> tuple[threading.Thread, list[int]]:
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    return thread, codes


def wait_for(predicate, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def message(task_id: str = "t1") -> str:
    return json.dumps({"task_id": task_id, "generation": 0, "reason": "start", "sent_at": 1.0})


def test_tasks_run_to_their_end_and_their_messages_are_deleted():
    app, queue = memory_app()
    ids = [app.client().start("steps", {"n": 5}, task_id=f"t{i}") for i in range(3)]
    shutdown = Shutdown()
    seen = []
    source = QueueSource("continuations", queue, ARN, app.handler, 60, slots=2)
    worker = QueueWorker([source], shutdown=shutdown, poll_wait_s=1, on_processed=seen.append)
    thread, codes = in_background(worker)
    wait_for(lambda: all(app.client().status(t).status.finished for t in ids))
    shutdown.begin(grace_s=3, reason="test")
    thread.join(5)
    assert codes == [0]
    assert [app.client().result(t) for t in ids] == [5, 5, 5]
    assert len(queue) == 0
    assert {p.task_id for p in seen} == set(ids)
    assert not any(p.failed for p in seen)


def test_a_message_received_after_the_stop_is_made_visible_again_at_once():
    queue = InMemoryContinuationQueue()
    queue.send(message())
    shutdown = Shutdown()
    handled = []

    def stop_on_receive(operation: str, _key: str) -> None:
        if operation == "receive":
            shutdown.begin(grace_s=1, reason="test")

    queue.on_call = stop_on_receive
    source = QueueSource("continuations", queue, ARN, lambda e, c: handled.append(e) or {}, 60)
    assert QueueWorker([source], shutdown=shutdown, poll_wait_s=0).run() == 0
    assert handled == []
    assert len(queue) == 1
    assert queue.next_visible_at() <= time.time()


def test_a_handler_that_raises_leaves_its_message_for_the_visibility_timeout():
    queue = InMemoryContinuationQueue(visibility_timeout_s=60)
    queue.send(message())
    shutdown = Shutdown()
    seen = []

    def broken(event, context):
        raise RuntimeError("the handler itself broke")

    source = QueueSource("continuations", queue, ARN, broken, 60)
    worker = QueueWorker([source], shutdown=shutdown, poll_wait_s=0, on_processed=seen.append)
    thread, codes = in_background(worker)
    wait_for(lambda: seen)
    shutdown.begin(grace_s=1, reason="test")
    thread.join(5)
    assert codes == [0]
    assert seen[0].failed
    assert seen[0].task_id == "t1"
    assert len(queue) == 1
    assert queue.next_visible_at() > time.time() + 30


def test_a_queue_that_does_not_exist_stops_the_worker_with_1():
    queue = InMemoryContinuationQueue()
    missing = ClientError(
        {"Error": {"Code": "AWS.SimpleQueueService.NonExistentQueue", "Message": "gone"}},
        "ReceiveMessage",
    )

    def gone(operation: str, _key: str) -> None:
        if operation == "receive":
            raise QueueError("receive failed") from missing

    queue.on_call = gone
    shutdown = Shutdown()
    source = QueueSource("continuations", queue, ARN, lambda e, c: {}, 60)
    worker = QueueWorker([source], shutdown=shutdown, grace_s=1)
    assert worker.run() == 1
    assert "cannot receive from the continuations queue" in (worker.error or "")
    assert shutdown.reason == "queue error"


def test_a_task_still_running_when_the_grace_ends_is_named_and_the_exit_is_1():
    queue = InMemoryContinuationQueue()
    queue.send(message("slow-1"))
    shutdown = Shutdown()
    release = threading.Event()

    def slow(event, context):
        release.wait(5)
        return {}

    source = QueueSource("continuations", queue, ARN, slow, 60)
    worker = QueueWorker([source], shutdown=shutdown, poll_wait_s=0)
    thread, codes = in_background(worker)
    wait_for(lambda: worker.running() == ["slow-1"])
    shutdown.begin(grace_s=0.2, reason="test")
    thread.join(5)
    release.set()
    assert codes == [1]
