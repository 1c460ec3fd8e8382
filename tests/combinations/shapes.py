"""The tasks the combination suite runs: one app per flavour and shape, built alike.

Every shape's task ``job`` runs the step ``prepare``, then its own middle (which waits for
something), then the step ``finish``, and returns ``finish``'s text, so that one test body
states each capability's promise for every shape:

- ``plain``: a durable sleep between the two steps;
- ``fanout``: three ``fetch`` steps side by side (``asyncio.gather`` in an async task,
  ``ctx.map`` in a sync one), then a sleep;
- ``child``: a child task ``helper`` (``ctx.invoke``) that runs a step ``assist`` and sleeps;
- ``callback``: a callback with an approval link, which the step ``send_link`` mails (in an
  async task, as ``wait_for_callback_async``'s submitter);
- ``agent``: a pydantic-ai agent (a scripted FunctionModel) that looks an order up and asks
  for the approval of a refund.

A ``Probe`` is what the test sees happen: each live execution of a step or a tool of the
test's own, in order; it breaks the steps the test names and cancels the task from inside the
step the test names, as a person pressing cancel while it runs would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from continuum import Continuum, TaskContext
from continuum.integrations.pydantic_ai import ContinuumDurability
from continuum.testing import ReadyAnswer, TaskHandle
from tests.flavours import FLAVOURS

SHAPES = ("plain", "fanout", "child", "callback", "agent")
#: ``pytestmark`` of every module of the suite: each test runs for each flavour and shape.
EVERY_COMBINATION = [
    pytest.mark.parametrize("flavour", FLAVOURS),
    pytest.mark.parametrize("shape", SHAPES),
]
TASK_ID = "job-1"
INPUT = {"n": 3}
#: The links' key and endpoint: the callback and agent shapes run with approval links on.
LINKS = {"signing_key": "a-long-random-key-for-tests", "callback_url": "https://links.test"}
#: The durable sleeps' length: an hour, jumped over on the virtual clock.
PAUSE_S = 3600.0
ITEMS = ("a", "b", "c")


class Job(BaseModel):
    n: int


class Probe:
    """What the test sees of the steps and tools it wrote: each live run, by name, in order."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        #: steps that raise when they run (until the test "deploys a fix" by emptying it).
        self.broken: set[str] = set()
        #: the step inside which the task's cancel is requested (the task sees it next).
        self.cancel_in: str | None = None
        self.app: Continuum | None = None
        self.task_id = TASK_ID

    def live(self, name: str) -> None:
        self.ran.append(name)
        if name in self.broken:
            raise RuntimeError(f"{name} is broken")
        if name == self.cancel_in and self.app is not None:
            self.app.client().cancel(self.task_id, reason="stopped by the test")


@dataclass
class Combo:
    """An app of one flavour and shape, with what a full run of its task ``job`` gives."""

    flavour: str
    shape: str
    app: Continuum
    probe: Probe
    #: the task's result when it runs to its end.
    result: str
    #: the probe's names a full run executes, each once (side by side ones in any order).
    steps: list[str]
    #: check_replay_safe's answers to what the task waits for.
    callbacks: dict[str, Any] = field(default_factory=dict)
    #: the links the callback shape's submitter handed out.
    outbox: list[str] = field(default_factory=list)

    def answer(self, task: TaskHandle) -> TaskHandle:
        """Answer what the task waits for, as a person would, until it ends."""
        for _ in range(4):
            if task.status.finished:
                break
            # The client's view: the test handle's waiters carry no link.
            waiting = self.app.client().status(task.task_id).waiting_for
            callbacks = [w for w in waiting if w.kind == "callback"]
            if not callbacks:
                task.run()
                continue
            if self.shape == "callback":
                url = callbacks[0].url
                assert url is not None, "links are on: the callback has a url"
                assert answer_link(self.app, url, "approve", "fine") == 200
                task.run()
            else:
                task.callback(callbacks[0].name).choose("approve")
        return task


def answer_link(app: Continuum, url: str, decision: str, comment: str) -> int:
    """What the link page's form posts, as the link function's URL receives it."""
    path = "/" + url.split("/", 3)[3]
    event = {
        "version": "2.0",
        "rawPath": path,
        "headers": {"content-type": "application/x-www-form-urlencoded"},
        "requestContext": {"http": {"method": "POST", "path": path}},
        "body": urlencode({"decision": decision, "comment": comment}),
        "isBase64Encoded": False,
    }
    status: int = app.callback_link_handler(event, None)["statusCode"]
    return status


def build(flavour: str, shape: str, *, pause_s: float = PAUSE_S, **options: Any) -> Combo:
    """The app of ``flavour`` ("sync" or "async") and ``shape`` (one of SHAPES)."""
    probe = Probe()
    links = shape in ("callback", "agent")
    app = Continuum(**({**LINKS, **options} if links else options))
    probe.app = app
    combo = Combo(flavour, shape, app, probe, result="", steps=[])
    middle = _MIDDLES[shape](combo, pause_s)

    if flavour == "sync":

        @app.step
        def prepare(n: int) -> int:
            probe.live("prepare")
            return n * 2

        @app.step
        def finish(x: int, got: str) -> str:
            probe.live("finish")
            return f"{x}: {got}"

        @app.task(state=Job)
        def job(ctx: TaskContext[Job]) -> str:
            x = prepare(ctx.state.n)
            return finish(x, middle(ctx, x))

    else:

        @app.step(name="prepare")
        async def prepare_async(n: int) -> int:
            probe.live("prepare")
            return n * 2

        @app.step(name="finish")
        async def finish_async(x: int, got: str) -> str:
            probe.live("finish")
            return f"{x}: {got}"

        @app.task(state=Job, name="job")
        async def job_async(ctx: TaskContext[Job]) -> str:
            x = await prepare_async(ctx.state.n)
            return await finish_async(x, await middle(ctx, x))

    combo.steps = ["prepare", *combo.steps, "finish"]
    combo.result = f"6: {combo.result}"
    return combo


Middle = Callable[[TaskContext[Job], int], Any]


def _plain(combo: Combo, pause_s: float) -> Middle:
    combo.result = "slept"
    if combo.flavour == "sync":

        def middle(ctx: TaskContext[Job], x: int) -> str:
            ctx.sleep(pause_s, name="pause")
            return "slept"

        return middle

    async def middle_async(ctx: TaskContext[Job], x: int) -> str:
        await ctx.sleep_async(pause_s, name="pause")
        return "slept"

    return middle_async


def _fanout(combo: Combo, pause_s: float) -> Middle:
    app, probe = combo.app, combo.probe
    combo.result, combo.steps = "A+B+C", ["fetch"] * len(ITEMS)
    if combo.flavour == "sync":

        @app.step
        def fetch(item: str) -> str:
            probe.live("fetch")
            return item.upper()

        def middle(ctx: TaskContext[Job], x: int) -> str:
            # One item at a time, so that a cancel inside one is seen by the next in order.
            batch = ctx.map(ITEMS, lambda c, item, i: fetch(item), name="items", max_concurrency=1)
            ctx.sleep(pause_s, name="pause")
            return "+".join(batch.values())

        return middle

    @app.step(name="fetch")
    async def fetch_async(item: str) -> str:
        probe.live("fetch")
        return item.upper()

    async def middle_async(ctx: TaskContext[Job], x: int) -> str:
        got = await asyncio.gather(*(fetch_async(item) for item in ITEMS))
        await ctx.sleep_async(pause_s, name="pause")
        return "+".join(got)

    return middle_async


def _child(combo: Combo, pause_s: float) -> Middle:
    app, probe = combo.app, combo.probe
    combo.result, combo.steps = "helped 7", ["assist"]
    if combo.flavour == "sync":

        @app.step
        def assist(n: int) -> int:
            probe.live("assist")
            return n + 1

        @app.task(state=Job)
        def helper(ctx: TaskContext[Job]) -> str:
            got = assist(ctx.state.n)
            ctx.sleep(pause_s, name="pause")
            return f"helped {got}"

        def middle(ctx: TaskContext[Job], x: int) -> str:
            got: str = ctx.invoke("helper", {"n": x}, name="helper")
            return got

        return middle

    @app.step(name="assist")
    async def assist_async(n: int) -> int:
        probe.live("assist")
        return n + 1

    @app.task(state=Job, name="helper")
    async def helper_async(ctx: TaskContext[Job]) -> str:
        got = await assist_async(ctx.state.n)
        await ctx.sleep_async(pause_s, name="pause")
        return f"helped {got}"

    async def middle_async(ctx: TaskContext[Job], x: int) -> str:
        got: str = await ctx.invoke_async("helper", {"n": x}, name="helper")
        return got

    return middle_async


def _callback(combo: Combo, pause_s: float) -> Middle:
    probe = combo.probe
    combo.result, combo.steps = "approved: fine", ["send_link"]
    combo.callbacks = {"approval": {"approved": True, "comment": "fine"}}

    def send_link(callback_id: str, url: str | None) -> None:
        probe.live("send_link")
        combo.outbox.append(url or "")

    def verdict(answer: dict[str, Any]) -> str:
        return f"{'approved' if answer['approved'] else 'denied'}: {answer['comment']}"

    if combo.flavour == "sync":
        mail = combo.app.step(name="send_link")(lambda url: send_link("", url))

        def middle(ctx: TaskContext[Job], x: int) -> str:
            # As docs/approval-links.md writes it: the link sent by a step of the task's own.
            cb = ctx.create_callback("approval", timeout=timedelta(days=3), request=f"${x}")
            mail(cb.url)
            return verdict(cb.result())

        return middle

    async def middle_async(ctx: TaskContext[Job], x: int) -> str:
        return verdict(
            await ctx.wait_for_callback_async(
                send_link, name="approval", timeout=timedelta(days=3), request=f"${x}"
            )
        )

    return middle_async


#: What the scripted model asks for, one response per entry; then it answers.
AGENT_SCRIPT: list[list[tuple[str, dict[str, Any]]]] = [
    [("lookup_order", {"order_id": "A1"})],
    [("issue_refund", {"order_id": "A1", "cents": 1250})],
]


def _agent(combo: Combo, pause_s: float) -> Middle:
    probe = combo.probe
    combo.result, combo.steps = "refunded 1250 cents on A1", ["lookup_order", "issue_refund"]
    combo.callbacks = {"approve.issue_refund": ReadyAnswer("approve")}

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(1 for m in messages if isinstance(m, ModelResponse))
        if step < len(AGENT_SCRIPT):
            calls = [ToolCallPart(t, a, tool_call_id=f"c{step}") for t, a in AGENT_SCRIPT[step]]
            return ModelResponse(parts=calls)
        return ModelResponse(parts=[TextPart("refunded 1250 cents on A1")])

    agent: Agent[None, str] = Agent(
        FunctionModel(respond, model_name="scripted"),
        name="support",
        capabilities=[ContinuumDurability(notify=lambda request: None)],
    )

    @agent.tool_plain
    def lookup_order(order_id: str) -> str:
        probe.live("lookup_order")
        return f"{order_id}: 1250 cents, broken"

    @agent.tool_plain(requires_approval=True)
    def issue_refund(order_id: str, cents: int) -> str:
        probe.live("issue_refund")
        return f"refunded {cents} cents on {order_id}"

    if combo.flavour == "sync":

        def middle(ctx: TaskContext[Job], x: int) -> str:
            return agent.run_sync("Order A1 arrived broken.").output

        return middle

    async def middle_async(ctx: TaskContext[Job], x: int) -> str:
        return (await agent.run("Order A1 arrived broken.")).output

    return middle_async


_MIDDLES: dict[str, Callable[[Combo, float], Middle]] = {
    "plain": _plain,
    "fanout": _fanout,
    "child": _child,
    "callback": _callback,
    "agent": _agent,
}
