"""Steps: decorated functions whose calls inside a task go through the journal.

A :class:`Step` is an ordinary callable. Called inside a running task it is timed, checked
against the budget, journaled, and on replay returns its recorded result without running.
Called anywhere else (a test, a script) it simply runs.

A step is journaled only in the thread that runs the task: the journal is ordered, and threads
finish in any order. A step called from another thread while a task runs is refused with a
clear error instead of running outside the journal (``ctx.map`` and ``ctx.parallel`` are the
way to run steps side by side), unless a step running now started that thread: it is then that
step's own work.

An ``async def`` step is an :class:`AsyncStep`: calling it returns a coroutine, and awaited
inside an async task it is journaled like a sync one (``_steps.async_step_calls``).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import threading
import types
import typing
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, cast

from pydantic import TypeAdapter

from continuum._base import clock
from continuum._define.callbacks import Callback
from continuum._record.waiting_for import Duration
from continuum.errors import ConfigurationError, ContinuumError

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class StepOptions:
    """How a step is run.

    Args:
        name: the step's name in keys, statistics and logs (default: the function's name).
        effect: the step changes the outside world; the journal is saved right after it, so a
            crash after it does not run it again.
        retries: how many times to run it again after it raises a retryable exception. The
            attempts are counted in the journal, across invocations.
        backoff_s: seconds to wait before the first retry; doubled for each next one.
        retry_on: the exception types worth retrying.
        preemptible: the step may be interrupted when it overruns and the deadline nears; its
            partial work is discarded and it runs again in the next invocation. Only for
            steps whose interruption harms nothing (a model call, a read).
        at_most_once: a started-marker is saved before the step runs; if its worker dies
            inside it, it is not run again: it fails with StepInterruptedError or, with
            retries left, a new attempt is scheduled (after its backoff).
    """

    name: str
    effect: bool = False
    preemptible: bool = False
    retries: int = 0
    backoff_s: float = 0.5
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    at_most_once: bool = False

    def __post_init__(self) -> None:
        if self.at_most_once and self.preemptible:
            raise ConfigurationError(
                f"step {self.name!r} cannot be both at_most_once and preemptible",
                hint="a preempted step runs again; an at_most_once step never does",
            )
        if self.retries < 0:
            raise ConfigurationError(f"step {self.name!r}: retries must be >= 0")
        if self.backoff_s < 0:
            raise ConfigurationError(f"step {self.name!r}: backoff_s must be >= 0")


class StepScope(Protocol):
    """The turn or child context a step runs in, as a test helper's step wrapper sees it."""

    @property
    def task_id(self) -> str: ...

    @property
    def turn(self) -> int: ...

    @property
    def active_key(self) -> str | None: ...


class Runner(Protocol):
    """What a running task offers its steps and its context: a turn or a child context of it.

    A protocol because this layer is below the one that implements it
    (``_turn.context_runner.ContextRunner``), which it cannot import.
    """

    @property
    def thread_id(self) -> int: ...

    @property
    def active_key(self) -> str | None: ...

    @property
    def active_cursor(self) -> Any: ...

    @property
    def task_id(self) -> str: ...

    @property
    def turn(self) -> int: ...

    def call_step(
        self, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any], key: str | None
    ) -> Any: ...

    async def call_step_async(
        self, step: Step[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any], key: str | None
    ) -> Any: ...

    def remaining(self) -> float: ...

    def sleep(self, duration: Duration, name: str | None) -> None: ...

    def create_callback(
        self, name: str | None, timeout: Duration | None, heartbeat: Duration | None, request: Any
    ) -> Callback: ...

    def callback_result(self, callback: Callback) -> Any:
        """``callback.result()``, journaled in this context (whichever made the callback)."""
        ...

    def refuse(self, error: ContinuumError) -> ContinuumError:
        """Remember an error that must fail the turn even if user code catches it."""
        ...

    def created(self, call: Any, name: str) -> None:
        """An async step's coroutine made in a sync turn: checked at its end for an await."""
        ...


#: The turn that is running in this thread, if any, so a step call can find its journal.
active_runner: contextvars.ContextVar[Runner | None] = contextvars.ContextVar(
    "continuum_active_runner", default=None
)
#: Every turn running in this process, by the thread that runs it.
running: dict[int, Runner] = {}


class Step(Generic[P, R]):
    """A decorated step. Keeps the wrapped function's signature for editors and mypy."""

    # What ``@dataclass`` made, by hand: generating it cost the cold import 3.5M instructions.
    __match_args__ = ("fn", "options", "_adapter")
    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        fn: Callable[P, R],
        options: StepOptions,
        _adapter: tuple[TypeAdapter[Any], bool] | None = None,
    ) -> None:
        self.fn = fn
        self.options = options
        self._adapter = _adapter

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}(fn={self.fn!r}, options={self.options!r})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        mine = (self.fn, self.options, self._adapter)
        return mine == (other.fn, other.options, other._adapter)

    @property
    def name(self) -> str:
        return self.options.name

    @property
    def adapter(self) -> TypeAdapter[Any]:
        """Converts results to JSON and back, following the return annotation."""
        return self.typing()[0]

    @property
    def typed(self) -> bool:
        """Whether the step declares its return type (else results must be plain JSON)."""
        return self.typing()[1]

    def typing(self) -> tuple[TypeAdapter[Any], bool]:
        """``(adapter, typed)``, built at the first call."""
        if self._adapter is None:
            self._adapter = return_adapter(self.fn, what=f"step {self.name!r}")
        return self._adapter

    def run_nested(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Called inside another step: part of the outer step's work, not journaled on its
        own, but its retries apply (their backoff slept in place)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return self.fn(*args, **kwargs)
            except Exception as exc:
                if not isinstance(exc, self.options.retry_on) or attempt > self.options.retries:
                    raise
                clock.sleep(self.options.backoff_s * 2 ** (attempt - 1))

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        runner = active_runner.get()
        if runner is None:
            if running:
                _refuse_foreign_thread(self.name)
            return self.fn(*args, **kwargs)
        if runner.thread_id != threading.get_ident():
            if runner.active_key is not None:  # a thread the running step started: its work
                nested: R = self.run_nested(args, kwargs)
                return nested
            raise runner.refuse(_thread_error(self.name, runner.task_id))
        result: R = runner.call_step(self, args, kwargs, None)
        return result


class AsyncStep(Step[P, R]):
    """A decorated ``async def`` step: calling it returns a coroutine to await.

    Awaited inside an async task it is journaled (the coroutine reads the task's runner when
    it starts, so a step started by ``asyncio.gather`` journals in its own asyncio task's
    child context); anywhere else it simply runs.
    """

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        call = self._call(args, kwargs)
        call.__qualname__ = self.options.name  # type: ignore[attr-defined]  # names its asyncio task
        runner = active_runner.get()
        if runner is not None:  # checked at the end of the turn: it must not stay unawaited
            runner.created(call, self.options.name)
        return cast(R, call)

    async def _call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        runner = active_runner.get()
        if runner is None:
            if running:
                _refuse_foreign_thread(self.name)
            return await cast(Any, self.fn)(*args, **kwargs)
        if runner.thread_id != threading.get_ident():
            if runner.active_key is not None:
                return await self.run_nested_async(args, kwargs)
            raise runner.refuse(_thread_error(self.name, runner.task_id))
        return await runner.call_step_async(self, args, kwargs, None)

    async def run_nested_async(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Awaited inside another step: part of its work, as :meth:`Step.run_nested`."""

        attempt = 0
        while True:
            attempt += 1
            try:
                return await cast(Any, self.fn)(*args, **kwargs)
            except Exception as exc:
                if not isinstance(exc, self.options.retry_on) or attempt > self.options.retries:
                    raise
                await clock.sleep_async(self.options.backoff_s * 2 ** (attempt - 1))


def make_step(fn: Callable[P, R], options: StepOptions) -> Step[P, R]:
    """The step of ``fn``: an :class:`AsyncStep` for an ``async def``, else a :class:`Step`."""
    kind = AsyncStep if is_async_callable(fn) else Step
    return kind(fn=fn, options=options)


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` returns a coroutine (an ``async def``, a partial of one, or an
    object whose ``__call__`` is one)."""
    target = _unwrap(fn)
    if isinstance(target, Step):
        return isinstance(target, AsyncStep)
    call = type(target).__call__ if _is_instance(target) else target
    return inspect.iscoroutinefunction(call)


def _thread_error(name: str, task_id: str | None) -> ContinuumError:
    return ContinuumError(
        f"step {name!r} was called from a thread other than the task's, where it would run "
        "outside the journal (and again after a suspension)",
        task_id=task_id,
        step=name,
        hint="call steps from the task function's own thread; to run steps side by side "
        "use ctx.map or ctx.parallel (in an async task: asyncio.gather, and "
        "`await ctx.step_async(step, ...)` to run a sync step in a thread)",
    )


def _refuse_foreign_thread(name: str) -> None:
    """A step called with no turn in this thread while turns run in others."""
    if threading.get_ident() in running:
        return
    busy = [r for r in list(running.values()) if r.active_key is None]
    if not busy:
        return  # every running task is inside a step: this is that step's own work
    error = _thread_error(name, busy[0].task_id if len(busy) == 1 else None)
    if len(busy) == 1:
        raise busy[0].refuse(error)
    raise error


def check_callable(fn: Callable[..., Any], *, what: str) -> None:
    """Refuse generator functions, sync or async: a task or step must return its value."""
    target = _unwrap(fn)
    call = type(target).__call__ if _is_instance(target) else target
    if inspect.isasyncgenfunction(call):
        raise ConfigurationError(
            f"{what} is an async generator function; its body would run outside the journal",
            hint="return a value (a list, say) instead of yielding",
        )
    if inspect.isgeneratorfunction(call):
        raise ConfigurationError(
            f"{what} is a generator function; its body would run outside the journal",
            hint="return a value (a list, say) instead of yielding",
        )


#: Adapters of undecorated callables, so ``ctx.step(fn)`` does not rebuild one per call.
_ADAPTERS: weakref.WeakKeyDictionary[Any, tuple[TypeAdapter[Any], bool]]
_ADAPTERS = weakref.WeakKeyDictionary()


def return_adapter(fn: Callable[..., Any], *, what: str) -> tuple[TypeAdapter[Any], bool]:
    """A TypeAdapter for ``fn``'s return annotation, and whether there is one.

    ``Annotated`` extras (serializers, validators) are kept. A callable without an annotation
    gets ``Any``: its results must then be plain JSON (see ``values.to_json``).
    """
    target = _unwrap(fn)
    if isinstance(target, Step):
        return target.typing()
    if _is_instance(target):
        target = type(target).__call__
    try:
        cached = _ADAPTERS.get(target)
    except TypeError:
        cached = None
    if cached is not None:
        return cached
    try:
        hints = _return_hint(target)
    except NameError as exc:
        raise ConfigurationError(
            f"{what}: cannot resolve its return annotation ({exc})",
            hint="define the types a step or task returns at module level",
        ) from exc
    except TypeError:
        hints = {}  # builtins and C functions have no annotations
    result = (TypeAdapter(hints["return"]), True) if "return" in hints else (_ANY, False)
    with contextlib.suppress(TypeError):  # a builtin is not weakly referable: no cache
        _ADAPTERS[target] = result
    return result


_ANY: TypeAdapter[Any] = TypeAdapter(Any)


def _return_hint(fn: Any) -> dict[str, Any]:
    """``{"return": type}`` for ``fn``'s return annotation, resolved alone: the parameters'
    annotations (a task's ``TaskContext[LocalModel]``) need not resolve."""
    annotations = getattr(fn, "__annotations__", None)
    if not isinstance(annotations, dict):
        raise TypeError("no annotations")
    if "return" not in annotations:
        return {}
    only = types.SimpleNamespace(__annotations__={"return": annotations["return"]})
    unwrapped = inspect.unwrap(fn)
    globalns = getattr(unwrapped, "__globals__", {})
    return typing.get_type_hints(only, globalns=globalns, include_extras=True)


def as_step(fn: Callable[..., Any], *, name: str | None = None, **options: Any) -> Step[Any, Any]:
    """The Step for ``fn``: itself if decorated (and no name or options are given), else an
    ad-hoc step named ``name`` or, by default, by a name that is stable across processes.

    The name must be the same in every process, since a replay matches it against the
    journal: a function's qualified name, a partial's function, a callable object's class.
    ``options`` are :class:`StepOptions` fields (``retries``, ``backoff_s``, ...).
    """
    if isinstance(fn, Step) and name is None and not options:
        return fn
    label = name or stable_name(fn)
    check_callable(fn, what=f"step {label!r}")
    step = make_step(fn, StepOptions(name=label, **options))
    step._adapter = return_adapter(fn, what=f"step {label!r}")
    return step


def stable_name(fn: Callable[..., Any]) -> str:
    """A name for ``fn`` that does not change between processes (no memory addresses)."""
    target = _unwrap(fn)
    if isinstance(target, Step):
        return target.name
    if _is_instance(target):
        name = type(target).__qualname__
    else:
        name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or ""
    if not name or "0x" in name:
        raise ConfigurationError(
            f"cannot give {fn!r} a stable step name",
            hint="decorate it with @app.step, or wrap it in a named function",
        )
    return str(name)


def _unwrap(fn: Any) -> Any:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def _is_instance(target: Any) -> bool:
    """A callable object (an instance whose class defines ``__call__``), not a function."""
    routine = inspect.isroutine(target) or inspect.isclass(target) or isinstance(target, Step)
    return not routine and callable(target)
