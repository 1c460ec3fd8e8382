"""Test helpers: run tasks in a test, check they are replay-safe, and in-memory S3 and SQS.

- :class:`TaskRunner` runs an app's tasks on the in-memory backend (or moto's) and a virtual
  clock: ``runner.run(task, input)`` takes a task to its end or until it waits for a callback
  or a signal; the :class:`TaskHandle` it returns reads the task (``status``, ``result``,
  ``step_counts``) and answers it (``callback(name).complete(...)``, ``signal``, ``cancel``);
  ``runner.advance(timedelta(days=2))`` lets its timers fire.
- :func:`check_replay_safe` suspends a task after each of its live steps in turn and asserts
  it ends the same, with each step run once.
- The pytest plugin (``continuum.testing.pytest_plugin``, loaded through an entry point) has
  the fixtures ``continuum_app``, ``continuum_runner`` and ``continuum_runner_factory``, and
  gives freezegun's fake dates pydantic schemas, for tests that freeze time themselves.
- ``Continuum(store=InMemoryRecordStore(), queue=InMemoryContinuationQueue())`` runs tasks with
  no AWS and no moto. The fakes keep the semantics the protocol relies on, as S3 and SQS (and
  moto) show them; the functional tests run against both to prove it. The store has
  conditional writes (``If-None-Match: *`` refuses an existing key, ``If-Match`` a changed
  etag, both with PreconditionFailed; ``If-Match`` on a missing key NoSuchKey), etags that are
  the MD5 of the body, versions and delete markers, tags, listing with a delimiter. The queue
  has per-message delays, a visibility timeout per receive, receive counts, a new receipt
  handle per receive, and optionally a dead-letter queue after ``max_receive_count``. Time
  comes from an injectable clock (``clock()`` returns epoch seconds), so tests can move it.
  Each fake has an ``on_call`` hook, called with the operation's name and key before it runs:
  raise from it to inject a fault.

Example:
    >>> with TaskRunner(app) as runner:  # doctest: +SKIP
    ...     task = runner.run("approve", {"item": "kayak"})
    ...     task.callback("manager").complete({"approved": True})
    ...     assert task.result == "shipped kayak"
    >>> answers = {"manager": {"approved": True}}
    >>> check_replay_safe(app, "approve", {"item": "kayak"}, callbacks=answers)  # doctest: +SKIP

May import: errors, _base, backends, _record, _define, _waits, _turn, _worker, _ops, _app, _local,
continuum.
"""

from continuum.backends.memory.clock import ManualClock
from continuum.backends.memory.queue import InMemoryContinuationQueue
from continuum.backends.memory.scheduler import InMemoryScheduler, ScheduleFirer
from continuum.backends.memory.store import InMemoryRecordStore
from continuum.testing.handles import CallbackHandle, TaskHandle
from continuum.testing.observe import StepRun
from continuum.testing.replay import (
    Failure,
    ReadyAnswer,
    ReplayDivergence,
    ReplayReport,
    ReplayRun,
    check_replay_safe,
)
from continuum.testing.runner import TaskRunner

__all__ = [
    "CallbackHandle",
    "Failure",
    "InMemoryContinuationQueue",
    "InMemoryRecordStore",
    "InMemoryScheduler",
    "ManualClock",
    "ReadyAnswer",
    "ReplayDivergence",
    "ReplayReport",
    "ReplayRun",
    "ScheduleFirer",
    "StepRun",
    "TaskHandle",
    "TaskRunner",
    "check_replay_safe",
]
