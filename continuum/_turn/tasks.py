"""Tasks and the registry: what an app defines, found by name when a continuation arrives."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, TypeAdapter

from continuum._base.json_values import copy_json, to_json
from continuum._define.settings import DEFAULT_MAX_CONTINUATIONS, Settings
from continuum._define.steps import Step, check_callable, is_async_callable, return_adapter
from continuum._turn.context import TaskContext
from continuum.errors import ConfigurationError, MigrationError, UnknownTaskError

if TYPE_CHECKING:
    from continuum._define.recurring import ScheduleDeclaration

S = TypeVar("S", bound=BaseModel)
_ANY: TypeAdapter[Any] = TypeAdapter(Any)


@dataclass
class Task(Generic[S]):
    """A decorated task: a function called turn after turn over a typed state.

    Attributes:
        version: the version of the state's schema this code expects. A record saved by a
            newer version is not run by this code (it is left for the newer code).
        migrations: by version, the function that migrates a state saved by that version to
            the next (default: none).
    """

    fn: Callable[[TaskContext[S]], Any]
    name: str
    state_model: type[S]
    version: int = 1
    migrations: Mapping[int, Callable[[Any], Any]] = field(default_factory=dict)
    max_continuations: int = DEFAULT_MAX_CONTINUATIONS
    confidence: float | None = None
    safety_margin_s: float | None = None
    _result_adapter: TypeAdapter[Any] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._check()

    def _check(self) -> None:
        check_callable(self.fn, what=f"task {self.name!r}")
        if self.version < 1:
            raise ConfigurationError(f"task {self.name!r}: version must be >= 1")
        wrong = sorted(v for v in self.migrations if not 1 <= v < self.version)
        if wrong:
            raise ConfigurationError(
                f"task {self.name!r}: migrations {wrong} do not lead to version {self.version}",
                hint="migrations={1: up1, 2: up2} migrate a state saved by version 1 to 2, "
                "then 2 to 3; give one per version below the task's",
            )

    def migrate(self, state: Any, from_version: int, *, task_id: str) -> Any:
        """A state saved by ``from_version`` of this task, migrated in order to this version.

        Raises:
            MigrationError: a migration is missing, raised, or made something JSON cannot hold.
        """
        for version in range(from_version, self.version):
            up = self.migrations.get(version)
            if up is None:
                raise MigrationError(
                    f"task {self.name!r} has no migration from state version {version} to "
                    f"{version + 1}",
                    task_id=task_id,
                    hint=f"add migrations={{{version}: ...}} to @app.task, deploy, then "
                    "`continuum retry TASK_ID`",
                )
            try:
                state = to_json(_ANY, up(copy_json(state)), what="the migrated state", typed=False)
            except Exception as exc:
                raise MigrationError(
                    f"migrating task {self.name!r}'s state from version {version} to "
                    f"{version + 1} failed: {type(exc).__name__}: {exc}",
                    task_id=task_id,
                    hint="fix the migration, deploy, then `continuum retry TASK_ID`",
                ) from exc
        return state

    def settings_under(self, app: Settings) -> Settings:
        """The settings this task runs under: the app's, with the task's own budget rule."""
        if self.confidence is None and self.safety_margin_s is None:
            return app
        return replace(
            app,
            confidence=app.confidence if self.confidence is None else self.confidence,
            safety_margin_s=app.safety_margin_s
            if self.safety_margin_s is None
            else self.safety_margin_s,
        )

    @property
    def is_async(self) -> bool:
        """Whether the task is an ``async def``: its turns run on the invocation's event loop."""
        return is_async_callable(self.fn)

    @property
    def result_adapter(self) -> TypeAdapter[Any]:
        """Converts the task's result to JSON, following its return annotation."""
        if self._result_adapter is None:
            self._result_adapter = return_adapter(self.fn, what=f"task {self.name!r}")[0]
        return self._result_adapter

    def __call__(self, ctx: TaskContext[S]) -> Any:
        return self.fn(ctx)


class Registry:
    """The tasks, steps and recurring schedules of one app, by name."""

    def __init__(self) -> None:
        self.tasks: dict[str, Task[Any]] = {}
        self.steps: dict[str, Step[Any, Any]] = {}
        self.schedules: dict[str, ScheduleDeclaration] = {}

    def add_task(self, task: Task[Any]) -> None:
        if task.name in self.tasks:
            raise ConfigurationError(f"two tasks are named {task.name!r}")
        self.tasks[task.name] = task

    def add_step(self, step: Step[Any, Any]) -> None:
        if step.name in self.steps:
            raise ConfigurationError(f"two steps are named {step.name!r}")
        check_callable(step.fn, what=f"step {step.name!r}")
        self.steps[step.name] = step

    def add_schedule(self, declaration: ScheduleDeclaration) -> None:
        if declaration.name in self.schedules:
            raise ConfigurationError(f"two schedules are named {declaration.name!r}")
        self.schedules[declaration.name] = declaration

    def task(self, name: str, *, task_id: str | None = None) -> Task[Any]:
        """The task called ``name``.

        Raises:
            UnknownTaskError: this app defines no such task (the error lists those it does).
        """
        task = self.tasks.get(name)
        if task is None:
            known = ", ".join(sorted(self.tasks)) or "none"
            raise UnknownTaskError(
                f"unknown task {name!r}; this app defines: {known}", task_id=task_id
            )
        return task
