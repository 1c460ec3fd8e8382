"""TaskContext: what a task function, and through ``current_context()`` a step, sees.

It is a thin view over the running turn (a :class:`~continuum.steps.Runner`, implemented by
the turn loop in ``turns.py``), which does the work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from continuum.control import Paused
from continuum.errors import ContinuumError
from continuum.steps import Runner, active_runner, as_step

S = TypeVar("S", bound=BaseModel)


class TaskContext(Generic[S]):
    """What a task function (and, through ``current_context()``, a step) sees.

    Attributes:
        state: the task's state; changes to it are kept when the turn completes.

    Example:
        >>> @app.task(state=Research)  # doctest: +SKIP
        ... def research(ctx: TaskContext[Research]) -> str | None:
        ...     ctx.state.notes.append(search(ctx.state.topic))
        ...     return None if len(ctx.state.notes) < 3 else "done"
    """

    def __init__(self, runner: Runner, state: S) -> None:
        self._runner = runner
        self.state = state

    @property
    def task_id(self) -> str:
        return self._runner.task_id

    @property
    def turn(self) -> int:
        """The number of this turn, from 0."""
        return self._runner.turn

    def step(
        self, fn: Callable[..., Any], *args: Any, key: str | None = None, **kwargs: Any
    ) -> Any:
        """Call ``fn`` as a step: journaled, timed, and replayed on re-entry.

        ``fn`` may be a decorated step, a function, a ``functools.partial`` or a callable
        object; its return annotation says what type a replay rebuilds. ``key`` names the call
        in the journal; by default it is the step's name and its ordinal within the turn.
        """
        return self._runner.call_step(as_step(fn), args, kwargs, key)

    def remaining(self) -> float:
        """Seconds left in this invocation."""
        return self._runner.remaining()

    @property
    def idempotency_key(self) -> str:
        """A key for the step running now, stable across its retries and re-executions.

        Pass it to an external system so that it can deduplicate a step that ran twice
        because a worker died before the journal recorded it.
        """
        return self._in_step("idempotency_key")

    @property
    def cursor(self) -> Any:
        """Inside a cooperative step: the cursor it last paused with, or None."""
        self._in_step("cursor")
        return self._runner.active_cursor

    def pause(self, cursor: Any) -> None:
        """Inside a step: save ``cursor`` (JSON) and continue this step in a fresh invocation.

        The step is called again with the same arguments and ``ctx.cursor == cursor``. Use it
        in a step that loops (a paginated download, a long stream) when ``ctx.remaining()``
        runs low, so one logical step can span several invocations.
        """
        self._in_step("pause()")
        raise Paused(cursor)

    def _in_step(self, what: str) -> str:
        key = self._runner.active_key
        if key is None:
            raise ContinuumError(
                f"{what} is only available while a step runs", task_id=self.task_id
            )
        return key


def current_context() -> TaskContext[Any]:
    """The context of the task running in this thread (for steps that need it).

    Example:
        >>> @app.step  # doctest: +SKIP
        ... def charge(amount: int) -> str:
        ...     return payments.charge(amount, idempotency_key=current_context().idempotency_key)
    """
    context = getattr(active_runner.get(), "ctx", None)
    if not isinstance(context, TaskContext):
        raise ContinuumError("no task is running in this thread")
    return context
