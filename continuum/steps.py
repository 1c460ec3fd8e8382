"""Steps: decorated functions whose calls inside a task go through the journal.

A :class:`Step` is an ordinary callable. Called inside a running task it is timed, checked
against the budget, journaled, and on replay returns its recorded result without running.
Called anywhere else (a test, a script) it simply runs.
"""

from __future__ import annotations

import contextvars
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, Protocol, TypeVar

from pydantic import TypeAdapter

from continuum.errors import ConfigurationError

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class StepOptions:
    """How a step is run.

    Args:
        name: the step's name in keys, statistics and logs (default: the function's name).
        effect: the step changes the outside world; the journal is saved right after it, so a
            crash after it does not run it again.
        retries: how many times to run it again after it raises a retryable exception.
        backoff_s: seconds to wait before the first retry; doubled for each next one.
        retry_on: the exception types worth retrying.
        preemptible: the step may be interrupted when it overruns and the deadline nears; its
            partial work is discarded and it runs again in the next invocation. Only for
            steps whose interruption harms nothing (a model call, a read).
    """

    name: str
    effect: bool = False
    preemptible: bool = False
    retries: int = 0
    backoff_s: float = 0.5
    retry_on: tuple[type[BaseException], ...] = (Exception,)


class StepRunner(Protocol):
    """What a running task offers its steps (implemented by the turn loop)."""

    def call_step(
        self, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any], key: str | None
    ) -> Any: ...


#: The turn that is running in this thread, if any, so a step call can find its journal.
active_runner: contextvars.ContextVar[StepRunner | None] = contextvars.ContextVar(
    "continuum_active_runner", default=None
)


@dataclass
class Step(Generic[P, R]):
    """A decorated step. Keeps the wrapped function's signature for editors and mypy."""

    fn: Callable[P, R]
    options: StepOptions
    _adapter: TypeAdapter[Any] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.options.name

    @property
    def adapter(self) -> TypeAdapter[Any]:
        """Converts results to JSON and back, following the return annotation."""
        if self._adapter is None:
            self._adapter = return_adapter(self.fn, what=f"step {self.name!r}")
        return self._adapter

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        runner = active_runner.get()
        if runner is None:
            return self.fn(*args, **kwargs)
        result: R = runner.call_step(self, args, kwargs, None)
        return result


def return_adapter(fn: Callable[..., Any], *, what: str) -> TypeAdapter[Any]:
    """A TypeAdapter for ``fn``'s return annotation (Any when there is none)."""
    try:
        hints = typing.get_type_hints(fn)
    except NameError as exc:
        raise ConfigurationError(
            f"{what}: cannot resolve its return annotation ({exc})",
            hint="define the types a step or task returns at module level",
        ) from exc
    return TypeAdapter(hints.get("return", Any))


def as_step(fn: Callable[..., Any]) -> Step[Any, Any]:
    """The Step for ``fn``: itself if decorated, else an ad-hoc step named after it."""
    if isinstance(fn, Step):
        return fn
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return Step(fn=fn, options=StepOptions(name=name))
