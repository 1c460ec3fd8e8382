"""The fan-out suite shares the waits suite's runtime fixture (virtual clock, both backends)."""

from tests.waits.conftest import _quiet_worker_logs, make_runtime

__all__ = ["_quiet_worker_logs", "make_runtime"]
