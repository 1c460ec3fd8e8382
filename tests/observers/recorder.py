"""An observer that keeps every event of the kinds a trace is made of, for the event tests."""

from __future__ import annotations

from typing import Any

from continuum import Observer
from continuum._define.events import (
    ContextEnded,
    ContextStarted,
    InvocationEnded,
    InvocationStarted,
    StepEnded,
    StepStarted,
    TaskFinished,
    WaitEnded,
    WaitStarted,
)


class Recorder(Observer):
    """Keeps every event of the kinds a trace is made of, in the order they came."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def invocation_started(self, event: InvocationStarted) -> None:
        self.events.append(event)

    def invocation_ended(self, event: InvocationEnded) -> None:
        self.events.append(event)

    def step_started(self, event: StepStarted) -> None:
        self.events.append(event)

    def step_ended(self, event: StepEnded) -> None:
        self.events.append(event)

    def wait_started(self, event: WaitStarted) -> None:
        self.events.append(event)

    def wait_ended(self, event: WaitEnded) -> None:
        self.events.append(event)

    def context_started(self, event: ContextStarted) -> None:
        self.events.append(event)

    def context_ended(self, event: ContextEnded) -> None:
        self.events.append(event)

    def task_finished(self, event: TaskFinished) -> None:
        self.events.append(event)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]
