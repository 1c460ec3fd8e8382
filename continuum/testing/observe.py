"""Watching an app's tasks run: each live step execution, and the error that failed a task.

The test helpers need what the record does not keep: which steps really ran, under which
journal key, with which arguments, and the exception (with its traceback) that failed a task.
While :func:`observing` is active, each task function of the app is wrapped. The wrapper keeps
the exception that escapes the task function, and routes the turn's step calls (decorated
steps, ``ctx.step``, a callback's submitter, a condition's check: all go through the turn's
``call_step``) through a :class:`StepLog`, which notes each live execution as it starts. A
replayed step does not call its function, so it is not noted. Nothing else about how the task
runs changes, unless the log has a ``stand_in``, which may answer a step in place of its
function (``check_replay_safe`` uses that to give every run the same step results).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from continuum._app.app import Continuum
from continuum._define.steps import Step, StepScope, is_async_callable
from continuum._turn.context import TaskContext
from continuum.errors import ConfigurationError


@dataclass
class StepRun:
    """One live execution of a step.

    Attributes:
        task_id: the task it ran for.
        turn: the turn it ran in (from 0).
        key: its journal key in that turn (``name#ordinal``, or the key given).
        name: the step's name.
        attempt: 1 for the first execution of this key in this turn, 2 for a retry, ...
        args: the positional arguments it was called with (a copy taken at the call).
        kwargs: the keyword arguments it was called with (a copy taken at the call).
        value: what it returned.
        error: the exception it raised, if it raised one.
        done: it returned or raised (False while it runs, or if it was interrupted).
        started_after: how many executions of the log had ended when it started.
        ended: its place in the order the log's executions ended in (None while it runs).
    """

    task_id: str
    turn: int
    key: str
    name: str
    attempt: int
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    value: Any = None
    error: Exception | None = None
    done: bool = False
    started_after: int = 0
    ended: int | None = None

    @property
    def where(self) -> str:
        """The step's key and turn, as messages name it: ``'fetch#1' in turn 0``."""
        return f"{self.key!r} in turn {self.turn}"


@dataclass(frozen=True)
class StandInAnswer:
    """What a stand-in gives a step instead of running its function: a value, or an error."""

    value: Any = None
    error: Exception | None = None
    #: passes of the event loop an awaited step lets go by before it answers: the executions
    #: that ended while it ran in the reference, so that steps side by side end in its order.
    after: int = 0


#: Called as each live step execution starts; an answer replaces running its function.
StandIn = Callable[[StepRun], StandInAnswer | None]


@dataclass
class StepLog:
    """Every live step execution of the observed tasks, in the order they started.

    Attributes:
        runs: the executions, oldest first.
        errors: per task id, the exception that escaped its task function (it failed the task).
        stand_in: if set, asked before each execution; an answer replaces the function's call.
    """

    runs: list[StepRun] = field(default_factory=list)
    errors: dict[str, Exception] = field(default_factory=dict)
    stand_in: StandIn | None = None
    _attempts: Counter[tuple[str, int, str]] = field(default_factory=Counter, repr=False)
    _ended: int = field(default=0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def of(self, task_id: str) -> list[StepRun]:
        """The executions for one task, oldest first."""
        with self._lock:
            return [run for run in self.runs if run.task_id == task_id]

    def finished(self, task_id: str) -> int:
        """How many executions for the task have returned or raised."""
        return sum(run.done for run in self.of(task_id))

    def counts(self, task_id: str) -> dict[str, int]:
        """Executions per step name for one task."""
        return dict(Counter(run.name for run in self.of(task_id)))

    # -- the hooks ----------------------------------------------------------------------------

    def wrap_task(self, fn: Callable[[TaskContext[Any]], Any]) -> Callable[[TaskContext[Any]], Any]:
        """The task function, watched: its step calls are noted, its failure kept."""

        if is_async_callable(fn):

            @functools.wraps(fn)
            async def async_task(ctx: TaskContext[Any]) -> Any:
                self._watch(ctx)
                try:
                    return await fn(ctx)
                except Exception as exc:
                    self.errors[ctx.task_id] = exc
                    raise

            return async_task

        @functools.wraps(fn)
        def task(ctx: TaskContext[Any]) -> Any:
            self._watch(ctx)
            try:
                return fn(ctx)
            except Exception as exc:  # continuum's control flow is a BaseException: not kept
                self.errors[ctx.task_id] = exc
                raise

        return task

    def _watch(self, ctx: TaskContext[Any]) -> None:
        runner = getattr(ctx, "_runner", None)
        if runner is None or not hasattr(runner, "step_wrapper"):
            raise ConfigurationError(
                "continuum.testing cannot see this task's step calls: TaskContext no longer "
                "keeps its turn loop as _runner with a step_wrapper hook",
                task_id=ctx.task_id,
                hint="update continuum/testing/observe.py to the turn loop's new shape",
            )
        # The turn loop's hook for live step calls: this invocation's only (and the child
        # contexts and batch items it runs, which share it); other apps are untouched.
        runner.step_wrapper = self._watched_step

    def _watched_step(self, step: Step[Any, Any], runner: StepScope) -> Step[Any, Any]:
        """A copy of ``step`` whose function notes each execution before it runs."""
        _ = step.adapter  # computed from the user's function: the copy keeps its return type
        fn = step.fn

        def execute(*args: Any, **kwargs: Any) -> Any:
            run = self._start(step.name, runner, args, kwargs)
            with self._noted(run):
                answer = self._answer(run)
                run.value = fn(*args, **kwargs) if answer is None else _given(answer)
            return run.value

        async def execute_async(*args: Any, **kwargs: Any) -> Any:
            run = self._start(step.name, runner, args, kwargs)
            with self._noted(run):
                answer = self._answer(run)
                if answer is None:
                    run.value = await fn(*args, **kwargs)
                else:
                    for _ in range(answer.after):
                        await asyncio.sleep(0)
                    run.value = _given(answer)
            return run.value

        watched = copy.copy(step)
        watched.fn = execute_async if is_async_callable(fn) else execute
        return watched

    def _answer(self, run: StepRun) -> StandInAnswer | None:
        """The test's stand-in answer for ``run``, or None: the step runs."""
        return self.stand_in(run) if self.stand_in is not None else None

    @contextlib.contextmanager
    def _noted(self, run: StepRun) -> Iterator[None]:
        """Note in ``run`` that its execution ended, how, and in which place."""
        try:
            yield
        except Exception as exc:
            run.error = exc
            self._ended_now(run)
            raise
        self._ended_now(run)

    def _ended_now(self, run: StepRun) -> None:
        with self._lock:
            run.done, run.ended, self._ended = True, self._ended, self._ended + 1

    def _start(
        self, name: str, runner: StepScope, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> StepRun:
        task_id, turn = runner.task_id, runner.turn
        key = (runner.active_key or "").removeprefix(f"{task_id}/{turn}/")
        args, kwargs = _copied(args), _copied(kwargs)
        with self._lock:
            self._attempts[task_id, turn, key] += 1
            attempt = self._attempts[task_id, turn, key]
            run = StepRun(task_id, turn, key, name, attempt, args, kwargs)
            run.started_after = self._ended
            self.runs.append(run)
        return run


def _given(answer: StandInAnswer) -> Any:
    """The stand-in's value, or its error raised."""
    if answer.error is not None:
        raise answer.error
    return answer.value


def _copied(value: Any) -> Any:
    """A deep copy, so that what the task later does to an argument does not change the log.

    A function or a bound method is kept as it is: a copy of a bound method would copy its
    object, and with it whatever that holds (an event loop, a thread pool).
    """
    if type(value) in (tuple, list):
        return type(value)(_copied(item) for item in value)
    if type(value) is dict:
        return {key: _copied(item) for key, item in value.items()}
    if callable(value):
        return value
    try:
        return copy.deepcopy(value)
    except Exception:  # a client, a lock, a generator: keep the object itself
        return value


@contextlib.contextmanager
def observing(app: Continuum, log: StepLog) -> Iterator[StepLog]:
    """Watch the app's tasks (those registered now) for the block; undone afterwards."""
    tasks = list(app.tasks.values())
    originals = [task.fn for task in tasks]
    for task in tasks:
        _ = task.result_adapter  # computed from the user's function, before it is wrapped
        task.fn = log.wrap_task(task.fn)
    try:
        yield log
    finally:
        for task, fn in zip(tasks, originals, strict=True):
            task.fn = fn
