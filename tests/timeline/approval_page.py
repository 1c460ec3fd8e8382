"""A real callback link page to look at: a task waits for a manager's approval of an expense,
and its link is served as ``continuum dev`` serves it.

Run it to make the screenshot in docs/approval-links.md (a phone's width, 375 px)::

    .venv/bin/python -m tests.timeline.approval_page docs/images/approval-link.png
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum._local.runtime import LocalRuntime
from continuum._waits.link_endpoint import LinkEndpoint
from continuum.timeline.server import TimelineServer
from tests.timeline.browser import Browser

#: A phone's viewport (CSS pixels), as an iPhone SE or a small Android shows a page.
PHONE = (375, 667)


class Expense(BaseModel):
    who: str = "Ada Lovelace"
    cents: int = 4200
    what: str = "Train tickets, Paris to Lyon, for the customer visit of 14 December"


def expense_app() -> Continuum:
    app = Continuum(signing_key="a-long-random-key")

    @app.task(state=Expense)
    def expense_approval(ctx: TaskContext[Expense]) -> Any:
        s = ctx.state
        cb = ctx.create_callback(
            "approval",
            timeout=timedelta(days=3),
            request={
                "title": f"Expense of ${s.cents / 100:.2f} by {s.who}",
                "summary": "Approve to reimburse it with the next payroll; reject to send it "
                "back to them with your comment.",
                "fields": [
                    ["Employee", s.who],
                    ["Amount", f"${s.cents / 100:.2f}"],
                    ["For", s.what],
                ],
                "asked_by": "Expenses bot",
                "timezone": "Europe/Paris",
                "expense_id": "exp-7f3a",
            },
        )
        return cb.result()

    return app


@contextlib.contextmanager
def waiting_approval() -> Iterator[str]:
    """The link of a task that waits for the approval, served until the block ends."""
    app = expense_app()
    runtime = LocalRuntime(app, budget_s=5, backend="memory", virtual_time=True)
    with runtime.time.running(), TimelineServer(app.client(), links=LinkEndpoint.of(app)) as pages:
        app.update_settings(callback_url=pages.url.rstrip("/"))
        waiting = runtime.run("expense_approval", {}, task_id="expense-1042")
        [waiter] = app.client().status(waiting.task_id).waiting_for
        assert waiter.url is not None
        yield waiter.url


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else Path("docs/images/approval-link.png")
    home = Path(tempfile.mkdtemp())
    with waiting_approval() as url, Browser(home / "profile", width=PHONE[0], height=PHONE[1]) as b:
        b.open(url)
        b.screenshot(target)
    shutil.rmtree(home, ignore_errors=True)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
