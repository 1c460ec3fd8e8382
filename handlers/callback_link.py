"""The callback link Lambda: a function URL (payload format 2.0) that answers callback links.

A person opens ``{CONTINUUM_CALLBACK_URL}/cb/{token}`` (``cb.url``): a GET shows the request
with Approve / Deny, a POST answers the callback and wakes its task
(``continuum._waits.link_endpoint``). The app comes from ``CONTINUUM_APP`` as for the worker,
its bucket, queue and signing key from the same environment. Its role may read the records
and inbox, write callback answers and send wakes; nothing else (infra/template.yaml).
"""

from __future__ import annotations

from typing import Any

import continuum._waits.link_endpoint  # noqa: F401 - the app loads it on first use; here, at init
from continuum import LambdaContext
from handlers.worker import load_app

app = load_app()


def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Lambda entry point: a function URL request in, its response out."""
    return app.callback_link_handler(event, context)
