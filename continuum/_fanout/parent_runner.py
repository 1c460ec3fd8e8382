"""What fan-out needs of the runner of the context it starts from: a child context, a batch or a
child task is started from a :class:`ParentRunner` (``_turn.context_runner.ContextRunner``,
which the layer above makes), and the task context it serves (:class:`ServedContext`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from continuum._record.model import JournalEntry
from continuum._steps.step_calls import StepCaller
from continuum._steps.turn_state import Halt, TurnState

if TYPE_CHECKING:
    from continuum._fanout.child_tasks import ChildTasks


class ServedContext(Protocol):
    """The task context a runner serves (``_turn.context.TaskContext``)."""

    @property
    def state(self) -> BaseModel: ...

    def served_by(self, runner: Any) -> ServedContext:
        """The same task's context (the same state) for another runner."""
        ...


class ParentRunner(Protocol):
    """A turn's or a child context's runner, as fan-out uses it."""

    state: TurnState
    steps: StepCaller
    children: ChildTasks | None

    @property
    def task_id(self) -> str: ...

    @property
    def context(self) -> ServedContext: ...

    def child(
        self, entries: list[JournalEntry], path: str, halt: Halt | None = None
    ) -> ParentRunner:
        """The runner of a child context that journals in ``entries`` under ``path``."""
        ...

    def virtual_child(self, path: str) -> ParentRunner:
        """The runner of a child context that journals in this one's journal."""
        ...

    def run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """Run ``fn(ctx, *args)`` as this runner's code in this thread."""
        ...

    async def run_awaited(self, call: Awaitable[Any], *, task_body: bool = False) -> Any:
        """Await ``call`` as this runner's code in the running asyncio task."""
        ...
