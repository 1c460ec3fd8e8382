"""The worker Lambda: continuation messages from the SQS event source.

The app is found by ``CONTINUUM_APP`` (``module:attribute``, default the sample agent); its
bucket and queue come from ``CONTINUUM_BUCKET`` and ``CONTINUUM_QUEUE_URL``. Importing this
module imports only what a worker needs: no moto, no rich, no CLI.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import continuum.worker  # noqa: F401 - load Powertools in Lambda's init phase, not on a message
from continuum import Continuum

DEFAULT_APP = "samples.research_agent:app"


def load_app(target: str | None = None) -> Continuum:
    """Import the app named ``module:attribute`` (default: ``CONTINUUM_APP``)."""
    target = target or os.environ.get("CONTINUUM_APP") or DEFAULT_APP
    module_name, _, attribute = target.partition(":")
    app = getattr(importlib.import_module(module_name), attribute or "app")
    if not isinstance(app, Continuum):
        raise TypeError(f"CONTINUUM_APP={target!r} is not a continuum.Continuum app")
    return app


app = load_app()


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point: an SQS batch in, the partial batch failures out."""
    return app.handler(event, context)
