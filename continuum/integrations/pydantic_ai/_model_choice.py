"""The model a deployment grants: Bedrock when the stack says which, else the given default."""

from __future__ import annotations

import os

from pydantic_ai.models import Model

#: Set by the SAM template's BedrockModelId parameter, with the permission to invoke it.
BEDROCK_MODEL_ENV = "CONTINUUM_BEDROCK_MODEL_ID"


def model_from_env(default: Model | str) -> Model | str:
    """``bedrock:<id>`` when ``CONTINUUM_BEDROCK_MODEL_ID`` is set (pydantic-ai's Bedrock
    provider builds it in each model step, in the function's region), else ``default``.

    Example:
        >>> agent = Agent(model_from_env(FunctionModel(scripted)), ...)  # doctest: +SKIP
    """
    model_id = os.environ.get("CONTINUUM_BEDROCK_MODEL_ID", "").strip()
    return f"bedrock:{model_id}" if model_id else default
