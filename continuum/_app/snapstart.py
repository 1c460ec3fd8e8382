"""Lambda SnapStart: what the snapshot should hold, and what a restored environment remakes.

With SnapStart on (the template's ``SnapStart`` parameter), Lambda runs the worker's init once,
when it publishes a version, snapshots the environment, and starts each new environment of
that version from the snapshot. What the init made is then shared by all of them, so on restore:

1. ``random`` is reseeded: its generator's state is in the snapshot, and every restored
   environment would draw the same numbers (botocore's retry jitter draws from it, and so may
   the tasks' own code);
2. the app forgets the boto3 clients it made (their connections were opened in another
   environment), its worker with the worker's warm records (what one environment wrote, another
   must read from the store), and the signing keys it read; the next message makes them anew.

Before the snapshot, the modules and service models that the first message would load are
loaded, so that the snapshot holds them instead of each restored environment.

The hooks register through ``snapshot_restore_py``, which Lambda's python runtimes ship and a
local interpreter lacks: without it, ``register`` does nothing.

Example:
    >>> from continuum import Continuum
    >>> Continuum().register_snapstart_hooks()  # in the handler module, once the app is loaded
    False
"""

from __future__ import annotations

import importlib
import random
from typing import Protocol

from continuum._base.signing_keys import clear_cache


class App(Protocol):
    """What the hooks use of a ``Continuum`` app (it imports this module, not the reverse)."""

    def _forget_environment(self) -> None: ...


#: Modules the first message imports on first use (the S3 and SQS backends, boto3, the
#: records on the blob store).
FIRST_USE_MODULES = (
    "boto3",
    "botocore.exceptions",
    "continuum._record.blob_records",
    "continuum.backends.s3",
    "continuum.backends.sqs",
)
#: The services whose models the first message loads: a client made and dropped before the
#: snapshot leaves them in boto3's default session, for the clients made after restore.
FIRST_USE_SERVICES = ("s3", "sqs")


def register(app: App) -> bool:
    """Register ``app``'s before-snapshot and after-restore hooks with Lambda's runtime.

    Returns:
        Whether they were registered: False where ``snapshot_restore_py`` is missing (any
        interpreter but Lambda's python3.12+ runtimes).
    """
    try:
        from snapshot_restore_py import (  # type: ignore[import-not-found, unused-ignore]
            register_after_restore,
            register_before_snapshot,
        )
    except ImportError:
        return False
    register_before_snapshot(before_snapshot, app)
    register_after_restore(after_restore, app)
    return True


def before_snapshot(app: App) -> None:
    """Load what the first message would (modules, service models), for the snapshot to hold.

    The app itself is left as it is: it makes its clients and reads its keys on the first
    message, after the restore.
    """
    for module in FIRST_USE_MODULES:
        importlib.import_module(module)
    import boto3

    for service in FIRST_USE_SERVICES:
        boto3.client(service)  # type: ignore[call-overload]


def after_restore(app: App) -> None:
    """Make this environment its own: reseed ``random``, and have the app forget its clients,
    its worker's warm records and the signing keys it read (the next message remakes them)."""
    random.seed()  # from os.urandom
    clear_cache()
    app._forget_environment()
