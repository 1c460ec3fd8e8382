"""The worker Lambda: continuation messages from the SQS event source.

The app is found by ``CONTINUUM_APP`` (``module:attribute``); its bucket and queue come from
``CONTINUUM_BUCKET`` and ``CONTINUUM_QUEUE_URL``. Importing this module imports only what a
worker needs: no moto, no CLI. With SnapStart, it registers the app's hooks: a restored
snapshot reseeds ``random`` and remakes the app's clients (docs/snapstart.md).
"""

from __future__ import annotations

import gc
import os
from typing import Any

# What the import makes (modules, classes, pydantic's schemas, the app) lives as long as the
# environment, yet CPython would collect while it is made, a full collection scanning all of
# it. The collector is paused until the app is loaded, and what was made is then frozen
# (gc.freeze): later collections, on messages, skip it too. Little of it is ever garbage.
collecting = gc.isenabled()
gc.disable()
try:
    import continuum._worker.worker  # noqa: F401 - load Powertools in Lambda's init phase
    from continuum import ConfigurationError, Continuum, LambdaContext
    from continuum._app.loading import load_target
except BaseException:
    if collecting:
        gc.enable()
    raise


def load_app(target: str | None = None) -> Continuum:
    """Import the app named ``module:attribute`` (default: ``CONTINUUM_APP``)."""
    target = target or os.environ.get("CONTINUUM_APP")
    if not target:
        raise ConfigurationError(
            "CONTINUUM_APP is not set", hint="set it to the module:attribute of your app"
        )
    return load_target(target, Continuum, what="CONTINUUM_APP")


try:
    app = load_app()
finally:
    gc.freeze()
    if collecting:
        gc.enable()

app.register_snapstart_hooks()  # only where Lambda's runtime has snapshot_restore_py


def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Lambda entry point: an SQS batch in, the partial batch failures out."""
    return app.handler(event, context)
