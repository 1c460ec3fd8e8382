"""The callback link Lambda: a function URL (payload format 2.0) that answers callback links.

A person opens ``{CONTINUUM_CALLBACK_URL}/cb/{token}`` (``cb.url``): a GET shows the request
with Approve / Deny, a POST answers the callback and wakes its task
(``continuum._waits.link_endpoint``). The app is found by ``CONTINUUM_APP`` as for the worker; its
bucket, queue and signing key come from the same environment. Its role may read the records
and inbox, write callback answers, and send wakes; nothing else.
"""

from __future__ import annotations

import os
from typing import Any

from continuum import ConfigurationError, Continuum, LambdaContext
from continuum._app.loading import load_target
from continuum._waits.link_endpoint import LinkEndpoint, handle_function_url_event


def load_app(target: str | None = None) -> Continuum:
    """Import the app named ``module:attribute`` (default: ``CONTINUUM_APP``)."""
    target = target or os.environ.get("CONTINUUM_APP")
    if not target:
        raise ConfigurationError(
            "CONTINUUM_APP is not set", hint="set it to the module:attribute of your app"
        )
    return load_target(target, Continuum, what="CONTINUUM_APP")


app = load_app()
endpoint = LinkEndpoint.of(app)


def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Lambda entry point: a function URL request in, its response out."""
    return handle_function_url_event(endpoint, event)
