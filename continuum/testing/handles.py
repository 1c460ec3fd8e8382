"""TaskHandle and CallbackHandle: what a test holds of a task a TaskRunner started.

A handle reads the task's record afresh each time, and answers the task as the outside world
would (a callback's result, a signal, a cancel request); then it runs the task on, until it
ends or waits for the outside world again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from continuum._base.json_shapes import ready_answers
from continuum._base.json_values import from_json
from continuum._record.model import Counters, ErrorInfo, Status, TaskRecord
from continuum._waits.kinds.callback_wait import CALLBACK
from continuum._worker.wake import waiting_for
from continuum.errors import ContinuumError, TaskFailedError, TaskNotFinishedError
from continuum.testing.observe import StepRun

if TYPE_CHECKING:
    from continuum._app.app import Continuum
    from continuum._local.runtime import LocalRuntime
    from continuum._ops.client import Client
    from continuum._ops.status import WaitingFor
    from continuum.testing.observe import StepLog


class Runs(Protocol):
    """What a handle uses of the :class:`~continuum.testing.TaskRunner` that made it."""

    app: Continuum
    log: StepLog

    @property
    def runtime(self) -> LocalRuntime: ...

    @property
    def client(self) -> Client: ...

    def drive(self, task_id: str, *, until_done: bool = False) -> Any: ...


class TaskHandle:
    """A task started by a :class:`TaskRunner`: read it, answer it, run it on.

    Each property reads the task's record afresh. The methods that answer the task (a
    callback, a signal, a cancel request) then run it until it ends or waits for the outside
    world again, and return the handle.

    Attributes:
        task_id: the task's id.
    """

    def __init__(self, runner: Runs, task_id: str) -> None:
        self.runner = runner
        self.task_id = task_id

    def __repr__(self) -> str:
        try:
            return f"<TaskHandle {self.task_id!r} {self.status.value}>"
        except ContinuumError:  # the runner is closed
            return f"<TaskHandle {self.task_id!r}>"

    # -- what it is doing ------------------------------------------------------------------------

    @property
    def record(self) -> TaskRecord:
        """The task's record, as stored now."""
        return self.runner.runtime.record(self.task_id)

    @property
    def status(self) -> Status:
        """``pending``, ``running``, ``suspended``, ``waiting``, or how it ended."""
        return self.record.status

    @property
    def result(self) -> Any:
        """The task's result, as the task returned it (rebuilt by its return annotation).

        Raises:
            TaskFailedError: the task failed or was cancelled; the message gives the error's
                type, message and step, and the exception that failed it (with its
                traceback) is the ``__cause__``.
            TaskNotFinishedError: the task has not ended; the message says what it waits for.
        """
        record = self.record
        if record.status == Status.SUCCEEDED:
            task = self.runner.app.registry.task(record.task_name, task_id=self.task_id)
            return from_json(task.result_adapter, record.result)
        if record.status.finished:
            error = record.error or ErrorInfo(type="Error", message=record.status.value)
            raise TaskFailedError(
                f"task {record.task_name!r} {record.status.value}: {error.type}: {error.message}",
                task_id=self.task_id,
                step=error.step,
            ) from self.runner.log.errors.get(self.task_id)
        raise self._not_finished(record)

    @property
    def error(self) -> ErrorInfo | None:
        """Why the task failed or was cancelled (type, message, step, turn); None otherwise."""
        return self.record.error

    @property
    def waiting_for(self) -> list[WaitingFor]:
        """What the task waits for now, then every callback it created and has not taken an
        answer for (each with its kind, name, id, deadline, request, and its link as
        ``client.status`` gives it: ``url``, when the app has a link endpoint and a key);
        empty once the task has finished."""
        return self.runner.client.status(self.task_id).waiting_for

    @property
    def counters(self) -> Counters:
        """The record's counters: invocations, continuations, turns, steps executed and
        replayed, waits, hops, ..."""
        return self.record.counters

    @property
    def step_runs(self) -> list[StepRun]:
        """Each live execution of a step for this task, in order (key, turn, arguments,
        outcome). A step replayed from the journal did not run, and is not here."""
        return self.runner.log.of(self.task_id)

    @property
    def step_counts(self) -> dict[str, int]:
        """Live executions per step name: ``{"count_words": 3}``."""
        return self.runner.log.counts(self.task_id)

    # -- running it ------------------------------------------------------------------------------

    def run(self) -> TaskHandle:
        """Run the task until it ends, or waits for a callback or a signal."""
        self.runner.drive(self.task_id)
        return self

    def run_until_done(self) -> TaskHandle:
        """Run the task until it ends, letting every timer fire: an unanswered callback or
        signal times out when its timeout comes.

        Raises:
            TaskNotFinishedError: the task waits for something with no timeout.
        """
        self.runner.drive(self.task_id, until_done=True)
        record = self.record
        if not record.status.finished:
            raise self._not_finished(record)
        return self

    def callback(self, name: str | None = None) -> CallbackHandle:
        """The callback the task created by ``name`` and has not taken an answer for (the only
        one, if no name is given).

        Raises:
            ContinuumError: the task has no such open callback (the message lists those it has).
        """
        open_ = [w for w in self.waiting_for if w.kind == CALLBACK.kind]
        found = [w for w in open_ if name is None or w.name == name]
        if len(found) == 1 and found[0].id is not None:
            return CallbackHandle(self, found[0].name, found[0].id, found[0].request)
        names = ", ".join(repr(w.name) for w in open_) or "none"
        wanted = f"callback {name!r}" if name is not None else "one open callback"
        raise ContinuumError(
            f"the task has not {wanted}; its open callbacks: {names} ({self.status.value})",
            task_id=self.task_id,
            hint="run the task until it creates the callback, and name it if it has several",
        )

    def signal(self, name: str, payload: Any = None, *, signal_id: str | None = None) -> TaskHandle:
        """Send signal ``name`` with ``payload`` (kept until a wait takes it), then run on."""
        self.runner.client.signal(self.task_id, name, payload, signal_id=signal_id)
        return self.run()

    def cancel(self, reason: str | None = None) -> TaskHandle:
        """Ask the task to stop (it sees TaskCancelledError at its next boundary), then run on."""
        self.runner.client.cancel(self.task_id, reason)
        return self.run()

    def _not_finished(self, record: TaskRecord) -> TaskNotFinishedError:
        waits = ", ".join(f"{w.kind} {w.name!r}" for w in waiting_for(record))
        doing = f"{record.status.value}, waiting for {waits}" if waits else record.status.value
        return TaskNotFinishedError(
            f"task {record.task_name!r} has not ended: it is {doing}",
            task_id=self.task_id,
            generation=record.generation,
            hint="answer it (handle.callback(name).complete(...), handle.signal(...)), or let "
            "its timers fire (runner.advance(...), handle.run_until_done())",
        )


class CallbackHandle:
    """A callback a task waits for (or will): answer it as the outside world would.

    Attributes:
        name: the callback's name.
        id: its id (what ``cb.id`` gave the task).
        request: what it asks (``ctx.create_callback(..., request=...)``; None: nothing).
    """

    def __init__(self, task: TaskHandle, name: str, callback_id: str, request: Any = None) -> None:
        self.task = task
        self.name = name
        self.id = callback_id
        self.request = request

    def __repr__(self) -> str:
        return f"<CallbackHandle {self.name!r} of {self.task.task_id!r}>"

    def complete(self, result: Any = None) -> TaskHandle:
        """Answer it with ``result`` (JSON), then run the task on."""
        self.task.runner.client.complete_callback(self.id, result)
        return self.task.run()

    def choose(self, ready: str) -> TaskHandle:
        """Answer it with its request's ready answer ``ready`` (``"approve"``), then run on.

        Raises:
            ContinuumError: the request offers no such answer (the message lists those it has).
        """
        answers = ready_answers(self.request)
        if ready not in answers:
            raise ContinuumError(
                f"callback {self.name!r} offers no ready answer {ready!r} "
                f"(it offers: {', '.join(answers) or 'none'})",
                task_id=self.task.task_id,
            )
        return self.complete(answers[ready])

    def fail(self, error_type: str, message: str) -> TaskHandle:
        """Fail it (``cb.result()`` raises CallbackFailedError), then run the task on."""
        self.task.runner.client.fail_callback(self.id, error_type, message)
        return self.task.run()

    def heartbeat(self) -> TaskHandle:
        """Tell the task the outside world still works on it (moves its heartbeat deadline)."""
        self.task.runner.client.heartbeat_callback(self.id)
        return self.task
