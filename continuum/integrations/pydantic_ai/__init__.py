"""pydantic-ai agents as durable continuum tasks: ``pip install 'continuum-lambda[pydantic-ai]'``.

Example:
    >>> from pydantic_ai import Agent  # doctest: +SKIP
    >>> from continuum.integrations.pydantic_ai import ContinuumDurability  # doctest: +SKIP
    >>> agent = Agent("bedrock:...", name="support", tools=[...],  # doctest: +SKIP
    ...               capabilities=[ContinuumDurability()])
    >>> @app.task(state=Chat)  # doctest: +SKIP
    ... def support(ctx: TaskContext[Chat]) -> str | None:
    ...     return agent.run_sync(ctx.state.question).output
    >>> @app.task(state=Chat)  # doctest: +SKIP
    ... async def support_async(ctx: TaskContext[Chat]) -> str | None:
    ...     return (await agent.run(ctx.state.question)).output
"""

try:
    import pydantic_ai  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "continuum.integrations.pydantic_ai needs pydantic-ai: "
        "pip install 'continuum-lambda[pydantic-ai]'"
    ) from exc

from continuum.integrations.pydantic_ai._approvals import (
    MAX_REFUSED_ANSWERS,
    ApprovalAnswer,
    ApprovalRequest,
    approval_digest,
    print_request,
)
from continuum.integrations.pydantic_ai._capability import ContinuumDurability
from continuum.integrations.pydantic_ai._model_choice import BEDROCK_MODEL_ENV, model_from_env
from continuum.integrations.pydantic_ai._operations import TOOL_CONFIG_KEY, UnitConfig

__all__ = [
    "BEDROCK_MODEL_ENV",
    "MAX_REFUSED_ANSWERS",
    "TOOL_CONFIG_KEY",
    "ApprovalAnswer",
    "ApprovalRequest",
    "ContinuumDurability",
    "UnitConfig",
    "approval_digest",
    "model_from_env",
    "print_request",
]
