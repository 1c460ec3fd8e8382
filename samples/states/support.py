"""The support agents' state model (see ``samples/states/__init__.py``)."""

from __future__ import annotations

from pydantic import BaseModel


class Chat(BaseModel):
    """What the next worker must know: the customer's question."""

    question: str
