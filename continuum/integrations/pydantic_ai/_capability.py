"""ContinuumDurability: the capability that makes a pydantic-ai agent durable in a continuum task.

Inside a running task (``active_runner`` is set, and no step is running), the
capability routes the agent's durable operations through the task's journal; anywhere else
(a test, a script, inside a step) it is transparent and the run is an ordinary agent run.

Awaited in an async task, the agent runs on the turn's event loop: tool calls asked together
run side by side (their results and events taken in the response's order, so a replay takes
the same path), sync tools in pydantic-ai's threads. Under ``run_sync`` (a sync task) tool
calls run one at a time and sync tools on the task's thread (``_units`` says why).
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import anyio
from pydantic import JsonValue
from pydantic_ai._agent_graph import set_agent_graph_sleep
from pydantic_ai._utils import disable_threads
from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.capabilities.abstract import WrapRunHandler
from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    DurabilityEngineSpec,
    ExternalEventError,
    ExternalEventWaiter,
    conversation_id_from_run_id,
    external_event_scope,
    replay_scope,
)
from pydantic_ai.durable_exec._operation_backend import in_durable_unit
from pydantic_ai.exceptions import UserError
from pydantic_ai.models import Model
from pydantic_ai.run import AgentRunResult
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.tools import AgentDepsT, DeferredToolRequests, DeferredToolResults, RunContext
from pydantic_ai.toolsets import AbstractToolset, ExternalToolset, FunctionToolset, WrapperToolset
from pydantic_ai.toolsets._dynamic import DynamicToolset

from continuum._define.steps import Runner, StepOptions, active_runner, as_step
from continuum._steps.control_flow import ControlFlow
from continuum._turn.context import current_context
from continuum.errors import CallbackFailedError, CallbackTimeoutError, TaskCancelledError
from continuum.integrations.pydantic_ai._approvals import Approvals, Notify, print_request
from continuum.integrations.pydantic_ai._operations import (
    TOOL_CONFIG_KEY,
    ContinuumOperationBackend,
    UnitConfig,
    operation_config,
)
from continuum.integrations.pydantic_ai._units import (
    on_turn_loop,
    run_unit,
    run_unit_async,
    unit_step,
)

ENGINE_NAME = "continuum"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _now() -> datetime:
    return datetime.now(UTC)


class _RunIds:
    """Agent runs started so far in each turn of each running turn loop (for replay-safe ids)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: weakref.WeakKeyDictionary[Runner, dict[int, int]] = (
            weakref.WeakKeyDictionary()
        )

    def next(self, runner: Runner) -> int:
        with self._lock:
            turns = self._counts.setdefault(runner, {})
            count = turns.get(runner.turn, 0)
            turns[runner.turn] = count + 1
            return count


_run_ids = _RunIds()


@dataclass(init=False)
class ContinuumDurability(BaseDurabilityCapability[AgentDepsT]):
    """Make an agent durable inside a continuum task: each model request and each tool call is
    one journaled step, and a tool that needs approval waits on a callback.

    Example:
        >>> agent = Agent(model, name="support", tools=[...],  # doctest: +SKIP
        ...               capabilities=[ContinuumDurability()])
        >>> @app.task(state=Chat)  # doctest: +SKIP
        ... def support(ctx: TaskContext[Chat]) -> str | None:
        ...     return agent.run_sync(ctx.state.question).output

        In an async task, awaited (tool calls asked together then run side by side):

        >>> @app.task(state=Chat)  # doctest: +SKIP
        ... async def support(ctx: TaskContext[Chat]) -> str | None:
        ...     return (await agent.run(ctx.state.question)).output

    Args:
        name: the name in every step's name (default: the agent's ``name``).
        models: more models, by id, for ``agent.run(model=id)`` (their id is in the step name).
        event_stream_handler: handles model events inside the model step, and each other
            event in a step of its own.
        model_step: the step options of model requests (default: none set).
        tool_step: the step options of tool calls; a tool's ``metadata={"continuum": {...}}``
            overrides them, and ``{"continuum": False}`` runs that tool outside any step.
        approval_timeout: how long a call waits for approval before it is denied (None: as
            long as it takes).
        notify: hands each :class:`ApprovalRequest` to a person (a step; default: print it).
    """

    engine_spec: ClassVar[DurabilityEngineSpec] = DurabilityEngineSpec(
        engine_name=ENGINE_NAME,
        durable_unit_noun="step",
        durable_container_noun="task",
        codec=JSON_CODEC,
        wrapped_toolset_kinds=frozenset({"function", "dynamic"}),
        toolset_lifecycles={"function": "enter-always", "dynamic": "enter-never"},
        journal_discovery=True,
        # wrap_run sets the tool calls' mode itself: side by side when awaited in an async task.
        sequential_tools_in_durable_context=False,
        unsupported_runtime_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        tool_config_key=TOOL_CONFIG_KEY,
        cancellation_error_types=(TaskCancelledError,),
    )

    def __init__(
        self,
        *,
        name: str | None = None,
        models: Mapping[str, Model] | None = None,
        event_stream_handler: EventStreamHandler[AgentDepsT] | None = None,
        model_step: UnitConfig | None = None,
        tool_step: UnitConfig | None = None,
        approval_timeout: timedelta | float | None = None,
        notify: Notify = print_request,
    ) -> None:
        super().__init__(models=models, event_stream_handler=event_stream_handler, name=name)
        self._config = operation_config(model_step or UnitConfig(), tool_step or UnitConfig())
        self._approvals = Approvals(notify=notify, timeout=approval_timeout)
        self._backend: ContinuumOperationBackend | None = None

    # -- where it applies -------------------------------------------------------------------------

    @property
    def in_durable_context(self) -> bool:
        """Inside a task's turn, outside its steps (a step is a durable unit already)."""
        runner = active_runner.get()
        return runner is not None and runner.active_key is None and not in_durable_unit()

    def get_durable_operation_backend(self) -> ContinuumOperationBackend:
        if self._backend is None:
            self._backend = ContinuumOperationBackend(
                agent_name=self.name, default_model_id=self.default_model_id, config=self._config
            )
        return self._backend

    def _bind_to_agent(self, agent: Any) -> None:
        self._backend = None  # the bound copy names its steps after the agent
        super()._bind_to_agent(agent)

    def _wrap_leaf_toolset(
        self, ts: AbstractToolset[AgentDepsT]
    ) -> WrapperToolset[AgentDepsT] | None:
        if isinstance(ts, FunctionToolset | DynamicToolset):
            return super()._wrap_leaf_toolset(ts)
        if isinstance(ts, ExternalToolset):
            return None  # its tools run outside the agent: nothing to journal
        raise UserError(
            f"{ENGINE_NAME} cannot journal the calls of toolset {ts.label} "
            f"({type(ts).__name__}): only function tools and DynamicToolset are supported yet, "
            "so its calls would run again on every replay of the turn. Call its server from a "
            "function tool instead, or run the agent inside one step."
        )

    # -- replay-safe ids, start time and sleep ---------------------------------------------------

    def get_default_run_id(self) -> str | None:
        runner = active_runner.get()
        if runner is None or not self.in_durable_context:
            return None
        # A child context's path (asyncio tasks gathered, a map's items) keeps its runs' ids
        # apart from its siblings', each counting from 0; the turn's own path is "".
        path = getattr(getattr(runner, "state", None), "path", "")
        return f"{runner.task_id}:{runner.turn}:{path}{_run_ids.next(runner)}"

    def get_default_conversation_id(self, run_id: str) -> str | None:
        return conversation_id_from_run_id(run_id) if self.in_durable_context else None

    async def get_run_start_time(self, run_id: str) -> datetime | None:
        if not self.in_durable_context:
            return None
        start: datetime = current_context().step(as_step(_now, name=self._label("run_start_time")))
        return start

    async def _sleep(self, seconds: float) -> None:
        if not self.in_durable_context:
            await anyio.sleep(max(seconds, 0.0))
        elif on_turn_loop():
            await current_context().sleep_async(max(seconds, 0.0), name=self._label("sleep"))
        else:
            current_context().sleep(max(seconds, 0.0), name=self._label("sleep"))

    def _label(self, what: str) -> str:
        return _UNSAFE.sub("_", f"{self.name}.{what}")[:128]

    # -- the run ---------------------------------------------------------------------------------

    async def wrap_run(
        self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        """Inside a task: the graph's sleeps are durable, external-event waits are callbacks,
        and continuum's own unwinding leaves the run as itself (never inside an exception
        group). Awaited in an async task, tool calls asked together run side by side, their
        results taken in the response's order; under ``run_sync``, one at a time, and sync
        tools on the task's thread."""
        if not self.in_durable_context:
            return await super().wrap_run(ctx, handler=handler)
        awaited = on_turn_loop()
        with ExitStack() as scopes:
            if awaited:
                scopes.enter_context(ToolManager.parallel_execution_mode("parallel_ordered_events"))
            else:
                scopes.enter_context(ToolManager.parallel_execution_mode("sequential"))
                scopes.enter_context(disable_threads())
            scopes.enter_context(set_agent_graph_sleep(self._sleep))
            scopes.enter_context(external_event_scope(_CallbackWaiter(self)))
            scopes.enter_context(replay_scope())
            try:
                return await super().wrap_run(ctx, handler=handler)
            except BaseExceptionGroup as group:
                found = _control_flow(group)
                if found is None:
                    raise
                raise found from None

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[AgentDepsT], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        """Approvals wait on callbacks (see ``_approvals``); other deferred calls are left."""
        if not self.in_durable_context or not requests.approvals:
            return None
        return self._approvals.decide(current_context(), requests)


class _CallbackWaiter(ExternalEventWaiter):
    """``wait_for_external_event`` inside a task: the token is a continuum callback id."""

    def __init__(self, durability: ContinuumDurability[Any]) -> None:
        self.durability = durability

    async def wait(self, name: str, *, ask: Any, timeout: timedelta | None) -> JsonValue:
        ctx, runner = current_context(), active_runner.get()
        assert runner is not None
        label = self.durability._label(f"event.{name}")
        callback = ctx.create_callback(label, timeout=timeout)
        awaited = on_turn_loop()
        step = unit_step(StepOptions(name=f"{label}.ask"), awaited=awaited)
        if awaited:
            answer, _ = await run_unit_async(runner, step, lambda: ask(callback.id))
        else:
            answer, _ = await run_unit(ctx, runner, step, lambda: ask(callback.id))
        if answer is not None:
            return answer  # type: ignore[return-value]
        try:
            result: JsonValue = callback.result()
        except (CallbackTimeoutError, CallbackFailedError) as exc:
            raise ExternalEventError(exc.message) from None
        return result


def _control_flow(group: BaseExceptionGroup[BaseException]) -> ControlFlow | None:
    """The first of continuum's control-flow exceptions inside ``group``, if any."""
    for error in group.exceptions:
        if isinstance(error, ControlFlow):
            return error
        if isinstance(error, BaseExceptionGroup):
            found = _control_flow(error)
            if found is not None:
                return found
    return None
