"""Answering a local run's waits: ``--answer NAME=JSON``, ``--signal NAME=JSON``, or a prompt.

``continuum run`` keeps moto inside its process, so nothing outside it can complete a
callback. When the task waits for one, the run answers it from ``--answer`` (by the callback's
name), or asks on the terminal; with neither it says how, and stops. ``--answer NAME=@READY``
sends the ready answer ``READY`` of the callback's request (``continuum._base.json_shapes``), as
``continuum callback complete ID --answer READY`` does.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import Any

from continuum._ops.client import Client
from continuum._record.model import TaskRecord
from continuum._waits.kinds.callback_wait import CALLBACK
from continuum._waits.kinds.registry import operation_of
from continuum.cli.common import CliError

#: The exit code of a run that stopped because its task waits for an answer it cannot get.
EXIT_WAITING = 3


@dataclass(frozen=True)
class Ready:
    """``@NAME``: the callback's own ready answer of that name, looked up when it is sent."""

    name: str


def ready_answer(request: Any, name: str, callback: str) -> Any:
    """The ready answer ``name`` of a callback's request, or a one-line error listing them."""
    from continuum._base.json_shapes import ready_answers

    answers = ready_answers(request)
    if name not in answers:
        offered = ", ".join(answers) or "none"
        raise CliError(f"callback {callback} has no ready answer {name!r} (it offers: {offered})")
    return answers[name]


def _pairs(items: list[str], flag: str, *, ready: bool = False) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise CliError(f"{flag} wants NAME=JSON, got {item!r}")
        if ready and text.startswith("@"):  # JSON never starts with "@"
            found.setdefault(name, []).append(Ready(text[1:]))
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CliError(f"{flag} {name}: the value is not valid JSON: {exc}") from None
        found.setdefault(name, []).append(value)
    return found


@dataclass
class Answers:
    """What the run may answer: callback results and signals by name, and whether to ask."""

    callbacks: dict[str, list[Any]] = field(default_factory=dict)
    signals: dict[str, list[Any]] = field(default_factory=dict)
    interactive: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Answers:
        return cls(
            callbacks=_pairs(getattr(args, "answer", []), "--answer", ready=True),
            signals=_pairs(getattr(args, "signal", []), "--signal"),
            interactive=sys.stdin.isatty(),
        )

    def send_signals(self, client: Client, task_id: str) -> None:
        for name, payloads in self.signals.items():
            for payload in payloads:
                client.signal(task_id, name, payload)
                print(f"sent signal {name!r}: {json.dumps(payload)}", flush=True)

    def answer(self, client: Client, record: TaskRecord) -> bool:
        """Answer what the waiting task waits for; False when nothing could be answered."""
        answered = False
        # --signal values were sent before the run (``send_signals``): a mailbox keeps them.
        given = {CALLBACK.kind: self.callbacks}
        for waiter in client.status(record.task_id).waiting_for:
            kind = operation_of(waiter.kind)
            if not kind.outside or (kind is CALLBACK and waiter.id is None):
                continue
            queued = given.get(kind.kind, {}).get(waiter.name)
            if queued:
                payload = queued.pop(0)
                if isinstance(payload, Ready):
                    payload = ready_answer(waiter.request, payload.name, repr(waiter.name))
            elif self.interactive:
                if waiter.request is not None:
                    print(f"{kind.kind} {waiter.name!r} asks: {_asks(waiter.name, waiter.request)}")
                payload = _ask(kind.prompt(waiter))
            else:
                continue
            kind.send(client, record.task_id, waiter, payload, answer_id=None)
            if (said := kind.sent(waiter, payload)) is not None:
                print(said, flush=True)
            answered = True
        return answered

    def stranded(self, record: TaskRecord) -> int:
        """Say what the task waits for and how to answer it; return the exit code."""
        print(f"\ntask {record.task_id} waits: {record.suspend_reason}")
        for waiter in record.waiting_for:
            kind = operation_of(waiter.kind)
            print(f"  {kind.line(waiter)}")
            if (asked := kind.shown(waiter, record).request) is not None:
                print(f"    asks: {_asks(waiter.name, asked)}")
        print(
            "answer in this run with --answer NAME=JSON (callbacks) or --signal NAME=JSON, "
            "or run it on `continuum dev` and use `continuum callback complete ID` / "
            "`continuum signal TASK_ID NAME` from another terminal"
        )
        return EXIT_WAITING


def _asks(callback: str, request: Any) -> str:
    """A callback's request in one line, without the shape (its ready answers say it)."""
    from continuum._base.json_shapes import for_a_person, ready_answers

    text = json.dumps(for_a_person(request))
    for name in ready_answers(request):
        text += f"\n    ready answer {name}: --answer '{callback}=@{name}'"
    return text


def _ask(prompt: str) -> Any:
    while True:
        text = input(f"{prompt} (Enter: true)> ").strip() or "true"
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            print(f"not JSON: {exc}")
