"""Default factories of the models' list and dict fields: ``Field(default_factory=new_list)``.

Pydantic reads each default factory's signature (``inspect.signature``) to learn whether it
takes the validated data. The builtins ``list`` and ``dict`` have only a text signature, which
``inspect`` parses with ``tokenize``: the first parse compiles tokenize's large regex (about
2 ms of the worker's cold import) and each later one costs about 0.09 ms, where a plain
function's signature is read directly (a few microseconds). The models have thirteen
such fields.
"""

from __future__ import annotations

from typing import Any


def new_list() -> list[Any]:
    """A new empty list (what ``list()`` returns)."""
    return []


def new_dict() -> dict[Any, Any]:
    """A new empty dict (what ``dict()`` returns)."""
    return {}
