"""The decorators of an app: ``@app.task(state=Model)`` and ``@app.step`` (bare or with options).

They build a :class:`~continuum.Task` or a :class:`~continuum.Step` and add it to
the app's registry; a step keeps the wrapped function's signature (``ParamSpec``), so editors
and mypy still help the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ParamSpec, Protocol, TypeVar, cast, overload

from pydantic import BaseModel

from continuum._define.settings import DEFAULT_MAX_CONTINUATIONS
from continuum._define.steps import Step, StepOptions, make_step
from continuum._turn.context import TaskContext
from continuum._turn.tasks import Registry, Task
from continuum.errors import ConfigurationError

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=BaseModel)


class StepDecorator(Protocol):
    """``@app.step(...)`` with options: turns a function into a Step of the same signature."""

    def __call__(self, fn: Callable[P, R], /) -> Step[P, R]: ...


class Decorators:
    """``task`` and ``step``, for a class that has a ``registry`` (the app)."""

    registry: Registry

    def task(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        state: type[S] | None = None,
        name: str | None = None,
        version: int = 1,
        migrations: Mapping[int, Callable[[Any], Any]] | None = None,
        max_continuations: int = DEFAULT_MAX_CONTINUATIONS,
        confidence: float | None = None,
        safety_margin_s: float | None = None,
    ) -> Callable[[Callable[[TaskContext[S]], Any]], Task[S]]:
        """Register a task over the state model ``state``.

        The function is called once per turn; it returns None to take another turn and
        anything else (JSON-serialisable) to finish with that result. ``confidence`` and
        ``safety_margin_s`` override the app's budget rule for this task. An ``async def`` task
        runs on the invocation's event loop (its steps awaited); generator functions are
        refused (ConfigurationError).

        ``version`` is the version of the state's schema; ``migrations={1: up1, 2: up2}``
        migrate a state saved by an older version, in order, when its record is loaded
        (each takes and returns the state as JSON). A record newer than the code (a
        rollback) is left untouched for a newer worker.

        Raises:
            ConfigurationError: ``state`` is missing (``@app.task`` without it) or is not a
                pydantic model class.
        """
        if fn is not None:  # ``@app.task`` bare: the function came where the options go
            _state_model(state, name or getattr(fn, "__name__", None))

        def register(fn: Callable[[TaskContext[S]], Any]) -> Task[S]:
            task = Task(
                fn=fn,
                name=name or fn.__name__,
                state_model=_state_model(state, name or fn.__name__),
                version=version,
                migrations=dict(migrations or {}),
                max_continuations=max_continuations,
                confidence=confidence,
                safety_margin_s=safety_margin_s,
            )
            self.registry.add_task(task)
            return task

        return register

    @overload
    def step(self, fn: Callable[P, R], /) -> Step[P, R]: ...

    @overload
    def step(
        self,
        *,
        name: str | None = None,
        effect: bool = False,
        retries: int = 0,
        backoff_s: float = 0.5,
        retry_on: tuple[type[BaseException], ...] = (Exception,),
        preemptible: bool = False,
        at_most_once: bool = False,
    ) -> StepDecorator: ...

    def step(  # type: ignore[misc]  # mypy cannot match a ParamSpec overload implementation
        self,
        fn: Callable[P, R] | None = None,
        /,
        *,
        name: str | None = None,
        effect: bool = False,
        retries: int = 0,
        backoff_s: float = 0.5,
        retry_on: tuple[type[BaseException], ...] = (Exception,),
        preemptible: bool = False,
        at_most_once: bool = False,
    ) -> Step[P, R] | StepDecorator:
        """Register a step, bare (``@app.step``) or with options (``@app.step(effect=True)``).

        See :class:`continuum.StepOptions` for what each option does.
        """

        def register(f: Callable[P, R]) -> Step[P, R]:
            options = StepOptions(
                name=name or f.__name__,
                effect=effect,
                retries=retries,
                backoff_s=backoff_s,
                retry_on=retry_on,
                preemptible=preemptible,
                at_most_once=at_most_once,
            )
            step = make_step(f, options)
            self.registry.add_step(step)
            return step

        if fn is not None:
            return register(fn)
        return cast(StepDecorator, register)


def _state_model(state: type[S] | None, task: str | None) -> type[S]:
    """``state`` if it is a pydantic model class; else an error where the task is declared."""
    named = f"task {task!r}" if task else "the task"
    fix = (
        "declare what the next worker must know as a pydantic model and name it: "
        "class MyState(BaseModel): ...; @app.task(state=MyState)"
    )
    if state is None:
        raise ConfigurationError(f"{named} has no state model", hint=fix)
    if not (isinstance(state, type) and issubclass(state, BaseModel)):
        raise ConfigurationError(
            f"{named} has state={state!r}, which is not a pydantic model class", hint=fix
        )
    return state
