"""A store fault while a parent looks at its retried children suspends the turn, never fails it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from continuum._fanout.adoption import running_again
from continuum._steps.control_flow import Suspend
from continuum.backends.store import TransientStoreError


class Runner:
    @contextlib.contextmanager
    def unlocked(self) -> Iterator[None]:
        yield


def test_a_transient_fault_reading_a_failed_childs_record_suspends_the_parent():
    def load(child: str) -> None:
        raise TransientStoreError(f"tasks/{child}/record.json: InternalError")

    starter = SimpleNamespace(client=SimpleNamespace(records=SimpleNamespace(load=load)))
    found = {"job.0.leaves-1.0": "succeeded", "job.0.leaves-1.1": "failed"}
    with pytest.raises(Suspend, match="could not read a child task's record"):
        running_again(Runner(), starter, found, "job")  # type: ignore[arg-type]
