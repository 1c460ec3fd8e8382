"""The dead-letter Lambda: fails (or continues again) the tasks of dead-lettered continuations.

Wired to the continuation queue's dead-letter queue. The app comes from ``CONTINUUM_APP`` as
for the worker (it needs the bucket and queue, not the tasks' code, but sharing the app keeps
one configuration).
"""

from __future__ import annotations

from typing import Any

import continuum._worker.dead_letter  # noqa: F401 - the app loads it on first use; here, at init
from continuum import LambdaContext
from handlers.worker import load_app

app = load_app()


def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Lambda entry point: a batch of dead letters in, the partial batch failures out."""
    return app.dead_letter_handler(event, context)
