"""The operator's pages (``continuum ui``, and ``continuum dev``: the same pages) of a real run
on moto, in headless Chromium: the task list, an agent task waiting for a person's approval,
a failed task with its traceback, and a parent with its child tasks; on a desktop's width, and
the agent's page on a phone's.

tests/timeline/test_operator_pages_in_chromium.py takes these pages and checks what they show;
run this module to make the screenshots docs/operating.md shows::

    .venv/bin/python -m tests.timeline.operator_pages docs/images
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum.timeline.server import TimelineServer
from samples import support_agent
from tests.support import LocalRuntime, moto_backend
from tests.timeline.approval_page import PHONE
from tests.timeline.browser import Browser

#: A laptop's viewport (CSS pixels): the pages' two-column layout.
DESKTOP = (1400, 900)
#: The feeds the digest's child tasks summarize, one child each.
FEEDS = ["tides", "harbour-notices", "weather"]
#: Why the invoice fails.
DECLINED = "card ending 4242 declined for invoice inv-204: insufficient funds"
#: The screenshots, by file name (docs/images/NAME.png): a phone's end in -phone.
NAMES = [
    "ui-task-list",
    "ui-agent-task",
    "ui-failed-task",
    "ui-parent-task",
    "ui-task-list-phone",
    "ui-agent-task-phone",
]
QUESTION = "Order A-1001 arrived broken. Can I get my money back?"


class Chat(BaseModel):
    question: str


class Digest(BaseModel):
    feeds: list[str]


class Feed(BaseModel):
    feed: str


class Invoice(BaseModel):
    invoice: str = "inv-204"
    cents: int = 12900


class PaymentDeclined(Exception):
    pass


def operator_app() -> Continuum:
    """An agent that needs an approval, a digest with a child task per feed, an invoice that
    fails: what an operator looks at."""
    app = Continuum()

    @app.task(state=Chat)
    def support(ctx: TaskContext[Chat]) -> str:
        return support_agent.agent.run_sync(ctx.state.question).output

    @app.step
    def summarize(feed: str) -> str:
        return f"{feed}: 3 new items, nothing urgent"

    @app.task(state=Feed)
    def summary(ctx: TaskContext[Feed]) -> str:
        return summarize(ctx.state.feed)

    @app.task(state=Digest)
    def digest(ctx: TaskContext[Digest]) -> list[str]:
        batch = ctx.map_tasks("summary", [{"feed": f} for f in ctx.state.feeds], name="feeds")
        return list(batch.values())

    @app.step
    def charge(invoice: str, cents: int) -> str:
        return _card_gateway(invoice, cents)

    @app.task(state=Invoice)
    def invoice(ctx: TaskContext[Invoice]) -> str:
        return charge(ctx.state.invoice, ctx.state.cents)

    return app


def _card_gateway(invoice: str, cents: int) -> str:
    raise PaymentDeclined(DECLINED)


@dataclass
class Stack:
    """The run's tasks on moto, served as ``continuum ui`` serves them."""

    runtime: LocalRuntime
    pages: TimelineServer
    ids: dict[str, str] = field(default_factory=dict)

    def url(self, kind: str) -> str:
        return f"{self.pages.url}tasks/{self.ids[kind]}"


@contextlib.contextmanager
def operator_stack() -> Iterator[Stack]:
    """The tasks run once on moto, then served (privately, as ``continuum ui``) until the
    block ends."""
    app = operator_app()
    with moto_backend():
        runtime = LocalRuntime(app, budget_s=2, backend="moto", virtual_time=True)
        ids = {
            "digest": runtime.run("digest", {"feeds": FEEDS}, task_id="digest-1207").task_id,
            "failed": runtime.run("invoice", {}, task_id="invoice-204").task_id,
            "agent": runtime.run("support", {"question": QUESTION}, task_id="support-88").task_id,
        }
        with TimelineServer(app.client(), name="continuum ui", private=True) as pages:
            yield Stack(runtime, pages, ids)


#: What the tests check on every page, read from the DOM: whether anything is wider than the
#: window, the headings, each table's rows, the task list's rows, the buttons and the traceback.
MEASURE = """(() => {
  const box = (e) => e.getBoundingClientRect();
  const seen = (e) => { const r = box(e);
    return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= window.innerWidth; };
  const text = (sel) => document.querySelector(sel)?.innerText.trim() ?? null;
  return {
    title: document.title,
    innerWidth: window.innerWidth,
    scrollWidth: document.documentElement.scrollWidth,
    widest: Math.max(...[...document.querySelectorAll("body *")].map((e) => box(e).right)),
    h1: text("h1"),
    h2: [...document.querySelectorAll("h2")].map((h) => h.innerText.trim()),
    tables: Object.fromEntries([...document.querySelectorAll("table")].map((t) => [t.className,
      [...t.tBodies[0].rows].map((tr) => [...tr.cells].map((td) => td.innerText.trim()))])),
    tasks: [...document.querySelectorAll("tr.task")].map((tr) =>
      ({id: tr.dataset.taskId, depth: tr.className.match(/depth-(\\d)/)[1]})),
    buttons: [...document.querySelectorAll("form button")].map((b) =>
      ({text: b.innerText.trim(), seen: seen(b)})),
    runs: document.querySelectorAll(".row.run").length,
    traceback: document.querySelector("#error details[open] pre")?.innerText ?? null,
  };
})()"""


@dataclass
class Shot:
    """One page as Chromium drew it: what the DOM said, and the screenshot."""

    name: str
    page: dict[str, Any]
    png: bytes

    @property
    def size(self) -> tuple[int, int]:
        return png_size(self.png)


def png_size(png: bytes) -> tuple[int, int]:
    """A PNG's width and height in pixels, from its header."""
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def take(browser: Browser, name: str, url: str, target: Path, click: str = "") -> Shot:
    """Open ``url``, click what ``click`` selects (if anything), measure it, screenshot it."""
    browser.open(url)
    if click:
        browser.evaluate(f"document.querySelector({click!r}).click()")
    page = {**browser.evaluate(MEASURE), "violations": browser.violations()}
    return Shot(name, page, browser.screenshot(target / f"{name}.png"))


def screenshots(target: Path, profile: Path) -> list[Shot]:
    """Every page, measured and written to ``target``."""
    profile.mkdir(parents=True, exist_ok=True)
    open_traceback = "#error details summary"  # "Where it raised", as a person opens it
    with operator_stack() as stack:
        with Browser(profile / "desktop", width=DESKTOP[0], height=DESKTOP[1]) as browser:
            browser.open(stack.pages.open_url)  # trades the token for the cookie
            shots = [
                take(browser, "ui-task-list", stack.pages.url, target),
                take(browser, "ui-agent-task", stack.url("agent"), target),
                take(browser, "ui-failed-task", stack.url("failed"), target, open_traceback),
                take(browser, "ui-parent-task", stack.url("digest"), target),
            ]
        with Browser(profile / "phone", width=PHONE[0], height=PHONE[1]) as browser:
            browser.open(stack.pages.open_url)
            shots += [
                take(browser, "ui-task-list-phone", stack.pages.url, target),
                take(browser, "ui-agent-task-phone", stack.url("agent"), target),
            ]
    return shots


def main(argv: list[str]) -> int:
    target = Path(argv[0]) if argv else Path("docs/images")
    home = Path(tempfile.mkdtemp())
    try:
        for shot in screenshots(target, home):
            print(f"wrote {target / shot.name}.png ({shot.size[0]}x{shot.size[1]})")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
