"""The worker Lambda: continuation messages from the SQS event source.

The app is found by ``CONTINUUM_APP`` (``module:attribute``); its bucket and queue come from
``CONTINUUM_BUCKET`` and ``CONTINUUM_QUEUE_URL``. Importing this module imports only what a
worker needs: no moto, no CLI.
"""

from __future__ import annotations

import os
from typing import Any

import continuum.worker  # noqa: F401 - load Powertools in Lambda's init phase, not on a message
from continuum import ConfigurationError, Continuum, LambdaContext
from continuum.loading import load_target


def load_app(target: str | None = None) -> Continuum:
    """Import the app named ``module:attribute`` (default: ``CONTINUUM_APP``)."""
    target = target or os.environ.get("CONTINUUM_APP")
    if not target:
        raise ConfigurationError(
            "CONTINUUM_APP is not set", hint="set it to the module:attribute of your app"
        )
    return load_target(target, Continuum, what="CONTINUUM_APP")


app = load_app()


def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Lambda entry point: an SQS batch in, the partial batch failures out."""
    return app.handler(event, context)
