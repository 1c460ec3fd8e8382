"""The tasks the test helpers are tested on: one app per test, with a list of what ran."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from continuum import Continuum, TaskContext


class Empty(BaseModel):
    """A task that needs no state."""


class Order(BaseModel):
    item: str
    timeout_days: float = 2.0


class Mailbox(BaseModel):
    wants: int = 2
    taken: list[Any] = []


class Receipt(BaseModel):
    item: str
    approved: bool


def shop(**options: Any) -> tuple[Continuum, list[str]]:
    """An app with three tasks, and the list each step appends to when it really runs.

    - ``approve``: reserves the item, waits for the manager's callback (two days), ships it.
    - ``listen``: takes ``wants`` signals named ``order``, one a turn.
    - ``receipt``: like approve, returning a Receipt model.

    (For a task that sleeps, ``tests.waits.test_cancel.cancellable_app``'s ``chore``.)
    """
    app = Continuum(**options)
    ran: list[str] = []

    @app.step
    def reserve(item: str) -> str:
        ran.append(f"reserve {item}")
        return f"{item} #1"

    @app.step
    def ask_manager(callback_id: str) -> None:
        ran.append("ask manager")

    @app.step
    def ship(reservation: str) -> str:
        ran.append(f"ship {reservation}")
        return f"shipped {reservation}"

    @app.task(state=Order)
    def approve(ctx: TaskContext[Order]) -> str:
        reservation = reserve(ctx.state.item)
        timeout = timedelta(days=ctx.state.timeout_days)
        answer = ctx.wait_for_callback(ask_manager, name="manager", timeout=timeout)
        return ship(reservation) if answer["approved"] else "declined"

    @app.task(state=Order)
    def receipt(ctx: TaskContext[Order]) -> Receipt:
        answer = ctx.wait_for_callback(ask_manager, name="manager")
        return Receipt(item=reserve(ctx.state.item), approved=answer["approved"])

    @app.step
    def handle(payload: Any) -> Any:
        ran.append(f"handle {payload}")
        return payload

    @app.task(state=Mailbox)
    def listen(ctx: TaskContext[Mailbox]) -> list[Any] | None:
        signal = ctx.wait_for_signal("order")
        ctx.state.taken.append(handle(signal.payload) if signal else None)
        return ctx.state.taken if len(ctx.state.taken) >= ctx.state.wants else None

    return app, ran
