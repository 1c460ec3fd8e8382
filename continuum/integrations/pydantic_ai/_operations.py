"""The operation backend: each durable operation of pydantic-ai as one continuum step.

pydantic-ai names each operation (``support__model.request``,
``support__function_toolset__<agent>.call_tool:lookup_order``) with its journal naming
convention (``JournalOperationNamer``): those names are the steps' names, so they are stable
compatibility data, the keys of the learned durations, and what a person reads in the record.
The step's key is its name and its ordinal in the turn, as for every continuum step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_ai.durable_exec import (
    JSON_CODEC,
    CallToolResult,
    DurableOperationId,
    JournalCallableOperationBackend,
    RoleBasedOperationConfig,
    ToolsetCallToolId,
    record_durable_unit,
)
from pydantic_ai.durable_exec._toolset import wrap_tool_call_result
from pydantic_ai.exceptions import ToolFailed, UserError
from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import ToolsetTool

from continuum._define.steps import Step, StepOptions, active_runner
from continuum._turn.context import current_context
from continuum.errors import StepError
from continuum.integrations.pydantic_ai._units import (
    on_turn_loop,
    run_unit,
    run_unit_async,
    unit_step,
)

#: The tool metadata key of a tool's own step options: ``metadata={"continuum": {...}}``, or
#: ``{"continuum": False}`` to run the tool inline, outside any step (a pure, cheap tool).
TOOL_CONFIG_KEY = "continuum"


class UnitConfig(BaseModel):
    """How one kind of durable unit runs as a continuum step (see ``StepOptions``).

    Attributes:
        effect: the journal is saved right after the unit, so a crash after it does not run it
            again (a tool that changes the world).
        at_most_once: a started-marker is saved before the unit runs; if its worker dies in it,
            it is not run again: a tool call then reports to the model that it may have run.
        retries: how many more attempts after a failure (the attempts are journaled).
        backoff_s: seconds before the first retry, doubled for each next one.

    Example:
        >>> UnitConfig(effect=True, at_most_once=True)  # doctest: +SKIP
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    effect: bool = False
    at_most_once: bool = False
    retries: int = 0
    backoff_s: float = 0.5


#: What an approved tool call always runs with: it changed the world once a person said so,
#: and it must not run a second time after a crash.
APPROVED = {"effect": True, "at_most_once": True}


def operation_config(model: UnitConfig, tool: UnitConfig) -> RoleBasedOperationConfig[UnitConfig]:
    """Per-role step options, with a tool's ``metadata={"continuum": ...}`` over ``tool``."""

    def resolve_tool(
        operation_id: DurableOperationId, found: object | None, tool_name: str
    ) -> UnitConfig | Literal[False]:
        del operation_id
        metadata = found.tool_def.metadata if isinstance(found, ToolsetTool) else None
        given = (metadata or {}).get(TOOL_CONFIG_KEY)
        if given is None:
            return tool
        if given is False:
            return False
        if not isinstance(given, dict | UnitConfig):
            raise UserError(
                f"tool {tool_name!r} has invalid {TOOL_CONFIG_KEY!r} metadata: expected a dict of "
                f"step options ({', '.join(UnitConfig.model_fields)}) or False, "
                f"got {type(given).__name__}"
            )
        fields = given.model_dump(exclude_unset=True) if isinstance(given, UnitConfig) else given
        try:
            return UnitConfig.model_validate({**tool.model_dump(), **fields})
        except ValidationError as exc:
            raise UserError(
                f"tool {tool_name!r} has invalid {TOOL_CONFIG_KEY!r} metadata: {exc}"
            ) from None

    return RoleBasedOperationConfig(
        model=model, event=model, capability=model, tool=tool, resolve_tool=resolve_tool
    )


class ContinuumOperationBackend(JournalCallableOperationBackend[UnitConfig]):
    """Runs every operation of one agent as a step of the continuum task that runs the agent."""

    def __init__(
        self,
        *,
        agent_name: str,
        default_model_id: str | None,
        config: RoleBasedOperationConfig[UnitConfig],
    ) -> None:
        super().__init__(agent_name=agent_name, default_model_id=default_model_id, config=config)
        self._steps: dict[tuple[str, UnitConfig, bool, bool], Step[Any, Any]] = {}

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: UnitConfig,
    ) -> object:
        runner = active_runner.get()
        assert runner is not None, "a unit runs only inside a task (in_durable_context)"
        tool_call = isinstance(operation_id, ToolsetCallToolId)
        awaited = on_turn_loop()
        step = self._step(
            name, config, approved=tool_call and _approved(cache_key), awaited=awaited
        )
        try:
            if awaited:
                payload, ran = await run_unit_async(runner, step, body)
            else:
                payload, ran = await run_unit(current_context(), runner, step, body)
        except StepError as error:
            if not (tool_call and error.error_type == "StepInterruptedError"):
                raise
            # The same live and on replay: the journal keeps the interrupted step's failure.
            payload, ran = await _tool_failed(_interrupted_message(name, error)), False
        record_durable_unit(executed=ran)
        return payload

    def _step(
        self, name: str, config: UnitConfig, *, approved: bool, awaited: bool
    ) -> Step[Any, Any]:
        key = (name, config, approved, awaited)
        step = self._steps.get(key)
        if step is None:
            fields = {**config.model_dump(), **(APPROVED if approved else {})}
            options = StepOptions(name=name, **fields)
            step = self._steps[key] = unit_step(options, awaited=awaited)
        return step


def _approved(cache_key: tuple[object, ...]) -> bool:
    """Whether a tool call's run context says a person approved this very call."""
    return any(isinstance(part, RunContext) and part.tool_call_approved for part in cache_key)


def _interrupted_message(name: str, error: StepError) -> str:
    tool = name.rpartition(":")[2] or name
    return (
        f"The tool {tool!r} was interrupted while it ran (its worker died), so it may or may not "
        "have taken effect. It is not run again automatically: check its effect before you ask "
        f"for it again. ({error.message})"
    )


async def _tool_failed(message: str) -> object:
    """The journal form of a tool call that failed with ``message`` for the model to read."""

    async def fail() -> None:
        raise ToolFailed(message)

    return JSON_CODEC.dump(CallToolResult, await wrap_tool_call_result(fail()))
