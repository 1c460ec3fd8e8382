"""The observers suite keeps the worker's logs to errors, as the waits suite does."""

from tests.waits.conftest import _quiet_worker_logs

__all__ = ["_quiet_worker_logs"]
