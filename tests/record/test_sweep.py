"""The sweep of a finished task always completes, eventually, at small cost.

When a task finishes, the blobs its final record uses and its inbox objects are tagged for the
lifecycle rule, its other blobs deleted, and its record tagged last, so a tagged record means
a complete sweep (``continuum/_record/sweep.py``). A sweep cut short (a worker killed right after
the finish write, a failed call) leaves the record untagged and the message comes back: the
next delivery, or the dead letter, finishes it. A message of a swept task costs one
GetObjectTagging more than before; a continuation of a running task, nothing more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from continuum import Continuum, Observer, Status
from tests.conftest import (
    ScriptedContext,
    StoreFaults,
    continuation,
    drain,
    raw_record,
    record_key,
    set_visibility_timeout,
    sqs_event,
)
from tests.record.test_blobs import current_blobs, digest_of, digests, tagged_finished
from tests.record.test_sweep_interrupted import (
    WorkerDied,
    die_after_the_first_finish_write,
    growing_app,
)
from tests.support import LocalRuntime, TransientStoreError, event_record

TASK = "sweep-spec"


class Outcomes(Observer):
    """What the worker did with each message it handled (and did not raise for)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def message_handled(self, event: Any) -> None:
        self.seen.append(event.outcome)


@dataclass
class Run:
    """The growing task, started, with its first mid-run blob removal failing: a blob is
    left for the finish sweep. The queue's visibility timeout is 0, so a message the handler
    did not acknowledge (or whose worker died) is delivered again at once."""

    app: Continuum
    runtime: LocalRuntime
    faults: StoreFaults
    live: list[int]
    outcomes: Outcomes = field(default_factory=Outcomes)

    def one_step(self) -> ScriptedContext:
        return ScriptedContext(1, executed=lambda: len(self.live))

    def to_the_finish_write(self) -> dict[str, Any]:
        """Invoke, one step each, up to the invocation that writes the finish; its result."""
        while True:
            result = self.runtime.invoke_once(self.one_step())
            assert result is not None, "the task should still have its message"
            if self.runtime.record(TASK).status.finished:
                return result

    def redeliver(self) -> dict[str, Any] | None:
        return self.runtime.invoke_once(ScriptedContext(None, executed=lambda: len(self.live)))

    def dead_letter(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Move the task's message to the dead-letter queue, as SQS does after
        ``maxReceiveCount`` receives; hand it to the dead-letter handler. Its event (to hand
        it again) and the handler's result."""
        (message,) = self.runtime.source.receive()
        self.runtime.source.delete(message.receipt_handle)
        event = {"Records": [event_record(message, self.runtime.queue_arn)]}
        event["Records"][0]["attributes"]["ApproximateReceiveCount"] = "6"
        return event, self.app.dead_letter_handler(event, self.one_step())


def started(backend: str) -> Run:
    app, live = growing_app()
    runtime = LocalRuntime(app, budget_s=900, backend=backend)
    set_visibility_timeout(runtime, 0)
    run = Run(app, runtime, StoreFaults(app), live)
    app.observe(run.outcomes)
    app.client().start("grow", {}, task_id=TASK)
    run.faults.fail_next("delete")  # the first superseded state blob is not removed mid-run
    return run


def unswept(runtime: LocalRuntime) -> list[str]:
    """What a complete sweep leaves otherwise: the record untagged, a blob the record does not
    use still there, a blob it uses untagged."""
    record = raw_record(runtime, TASK)
    left = [f"record {record['status']}, untagged"] if not swept_record(runtime) else []
    for key in current_blobs(runtime, TASK):
        if digest_of(key) not in digests(record):
            left.append(f"unreferenced {key}")
        elif not tagged_finished(runtime, key):
            left.append(f"untagged {key}")
    return left


def swept_record(runtime: LocalRuntime) -> bool:
    return tagged_finished(runtime, record_key(TASK))


def fail_once_after_the_finish_write(
    run: Run, operation: str, where: Callable[[str], bool]
) -> list[str]:
    """Once the first finish write landed, the next call of ``operation`` on a key ``where``
    answers S3's 500 (after botocore's retries). The keys it failed on."""
    finished: list[int] = []
    failed: list[str] = []

    def then_arm(write: Callable[[], str]) -> str:
        etag = write()
        finished.append(1)
        return etag

    def hook(call: Callable[..., Any], key: str, *args: Any, **kwargs: Any) -> Any:
        if finished and not failed and where(key):
            failed.append(key)
            raise TransientStoreError(f"{key}: InternalError (injected)")
        return call(key, *args, **kwargs)

    run.faults.on_finish_write(then_arm)
    run.faults.around(operation, hook)
    return failed


# -- a worker killed right after the finish write -----------------------------------------


def killed_right_after_the_finish_write(backend: str) -> Run:
    """The task run until its worker died right after the finish write: finished, unswept."""
    run = started(backend)
    die_after_the_first_finish_write(run.faults)
    with pytest.raises(WorkerDied):
        drain(run.runtime, TASK, lambda i: run.one_step())
    return run


def test_a_worker_killed_right_after_the_finish_write_leaves_the_sweep_to_its_redelivery(aws):
    run = started(aws)
    die_after_the_first_finish_write(run.faults)

    with pytest.raises(WorkerDied):
        drain(run.runtime, TASK, lambda i: run.one_step())
    assert run.runtime.record(TASK).status == Status.SUCCEEDED
    assert unswept(run.runtime)  # the record is untagged; the left blob is still there

    assert run.redeliver() == {"batchItemFailures": []}  # the message comes back: it sweeps

    assert unswept(run.runtime) == []
    assert run.outcomes.seen[-1] == "finished-swept"
    assert run.redeliver() is None  # and is acknowledged


# -- a call of the sweep fails ------------------------------------------------------------

#: Each call of the finish sweep, and how to recognise it: (store operation, key test).
SWEEP_CALLS: dict[str, tuple[str, Callable[[str], bool]]] = {
    "the blob listing": ("list_keys", lambda key: key.endswith("/blobs/")),
    "the left blob's delete": ("delete", lambda key: "/blobs/" in key),
    "a used blob's tag": ("tag", lambda key: "/blobs/" in key),
    "the inbox listing": ("list_keys", lambda key: key.endswith("/inbox/")),
    "the record's tag": ("tag", lambda key: key.endswith("/record.json")),
}


@pytest.mark.parametrize("call", SWEEP_CALLS)
def test_a_failed_call_of_the_sweep_has_the_message_retried_and_the_retry_finishes_it(aws, call):
    run = started(aws)
    failed = fail_once_after_the_finish_write(run, *SWEEP_CALLS[call])

    finishing = run.to_the_finish_write()

    assert failed, f"{call} should have been made, and failed"
    # The finish write landed, but the message is not acknowledged: SQS delivers it again.
    assert run.runtime.record(TASK).status == Status.SUCCEEDED
    assert len(finishing["batchItemFailures"]) == 1
    assert not swept_record(run.runtime)

    assert run.redeliver() == {"batchItemFailures": []}

    assert unswept(run.runtime) == []
    assert run.outcomes.seen[-1] == "finished-swept"
    assert run.redeliver() is None


def test_a_sweep_that_fails_again_on_the_redelivery_is_retried_again(aws):
    run = killed_right_after_the_finish_write(aws)

    run.faults.fail_next("list_keys")
    retried = run.redeliver()

    assert retried is not None
    assert len(retried["batchItemFailures"]) == 1  # failed again: it comes back again
    assert unswept(run.runtime)
    assert run.redeliver() == {"batchItemFailures": []}
    assert unswept(run.runtime) == []


# -- the dead-letter handler --------------------------------------------------------------


def test_a_dead_letter_of_a_finished_unswept_task_sweeps_it(aws):
    run = killed_right_after_the_finish_write(aws)
    assert unswept(run.runtime)

    _, result = run.dead_letter()

    assert result == {"batchItemFailures": []}
    assert unswept(run.runtime) == []
    assert run.runtime.record(TASK).status == Status.SUCCEEDED  # and nothing else changed


def test_a_dead_letter_whose_sweep_fails_comes_back_and_sweeps(aws):
    run = killed_right_after_the_finish_write(aws)
    run.faults.fail_next("delete")

    event, result = run.dead_letter()

    assert len(result["batchItemFailures"]) == 1  # the dead-letter queue delivers it again
    assert unswept(run.runtime)
    assert run.app.dead_letter_handler(event, run.one_step()) == {"batchItemFailures": []}
    assert unswept(run.runtime) == []


def test_a_dead_letter_that_fails_its_task_and_cannot_sweep_it_comes_back_to_sweep(aws):
    run = started(aws)
    run.runtime.invoke_once(run.one_step())  # the task runs a step and suspends
    failed = fail_once_after_the_finish_write(run, *SWEEP_CALLS["the record's tag"])

    event, result = run.dead_letter()  # its continuation kept failing: the task fails

    assert failed
    assert run.runtime.record(TASK).status == Status.FAILED
    assert len(result["batchItemFailures"]) == 1
    assert run.app.dead_letter_handler(event, run.one_step()) == {"batchItemFailures": []}
    assert unswept(run.runtime) == []


# -- what it costs -------------------------------------------------------------------------


def test_a_message_of_a_swept_task_costs_one_tag_read_more_and_writes_nothing(aws):
    run = started(aws)
    drain(run.runtime, TASK, lambda i: run.one_step())
    assert unswept(run.runtime) == []
    late = sqs_event(continuation(TASK, 0), message_ids=["late-duplicate"])
    run.runtime.counter.calls.clear()

    assert run.app.handler(late, run.one_step()) == {"batchItemFailures": []}

    calls = dict(run.runtime.counter.calls)
    blobs = len(digests(raw_record(run.runtime, TASK)))
    assert calls == {"s3:GetObject": 1 + blobs, "s3:GetObjectTagging": 1}
    assert run.outcomes.seen[-1] == "finished"


def test_a_run_without_faults_reads_no_tags_and_tags_what_the_finish_always_tagged(aws):
    app, live = growing_app()
    runtime = LocalRuntime(app, budget_s=900, backend=aws)
    app.client().start("grow", {}, task_id=TASK)

    drain(runtime, TASK, lambda i: ScriptedContext(1, executed=lambda: len(live)))

    calls = runtime.counter.calls
    assert runtime.record(TASK).counters.continuations >= 3
    assert calls["s3:GetObjectTagging"] == 0  # no continuation, nor the finish, reads tags
    used = len(digests(raw_record(runtime, TASK)))
    # Its blobs, the finish's close of the inbox to cancels, then the record.
    assert calls["s3:PutObjectTagging"] == used + 2
    assert unswept(runtime) == []
