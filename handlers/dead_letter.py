"""The dead-letter Lambda: marks the tasks of dead-lettered continuations ``failed``.

Wired to the continuation queue's dead-letter queue. The app comes from ``CONTINUUM_APP`` as
for the worker (it needs the bucket, not the tasks' code, but sharing the app keeps one
configuration).
"""

from __future__ import annotations

from typing import Any

from handlers.worker import load_app

app = load_app()


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point: a batch of dead letters in, the partial batch failures out."""
    return app.dead_letter_handler(event, context)
