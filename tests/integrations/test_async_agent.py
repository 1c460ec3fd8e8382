"""An agent awaited in an async task: the tool calls a model asked for together run side by
side, each one step, keyed by the model's response order (whatever order they finish in), with
no journal thread; a sync tool runs in a thread. The suite's other files run every engine test
against this path too (the ``engine`` fixture); this file holds what only this path does."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from pydantic_ai import Agent

from continuum import Continuum, Status, TaskContext
from continuum.integrations.pydantic_ai import ContinuumDurability, _units
from tests.conftest import ScriptedContext, drain
from tests.integrations.agents import Chat, Ledger, scripted_model

#: One response that asks for three tools at once, then the answer.
TOGETHER = [[("first", {}), ("second", {}), ("third", {})]]
OUTPUT = "done after 3 tools: first=FIRST; second=SECOND; third=THIRD"
TOOL = "support__function_toolset__<agent>.call_tool"
#: The key of each step: a tool call's is in the child context of the asyncio task that ran
#: it, made in the response's order. The keys hold pydantic-ai's and anyio's task names, so
#: they are compatibility data like the steps' names (a change strands suspended tasks).
KEYS = [
    "run#3/_run_coro#2/support__model.request#0",
    f"run#3/_run_coro#3/_call_tool#0/{TOOL}:first#0",
    f"run#3/_run_coro#3/_call_tool#1/{TOOL}:second#0",
    f"run#3/_run_coro#3/_call_tool#2/{TOOL}:third#0",
    "run#3/_run_coro#4/support__model.request#0",
]


def awaited_app(agent: Agent[None, str]) -> Continuum:
    app = Continuum()

    @app.task(state=Chat)
    async def support(ctx: TaskContext[Chat]) -> str:
        return (await agent.run(ctx.state.question)).output

    return app


def step_keys(record: Any) -> list[str]:
    """The key of each step of the journal, with the paths of its child contexts."""

    def visit(entries: list[Any], path: str) -> list[str]:
        keys: list[str] = []
        for entry in entries:
            if entry.kind == "step":
                keys.append(path + entry.key)
            keys.extend(visit(entry.children or [], f"{path}{entry.key}/"))
        return keys

    return visit(record.journal, "")


@pytest.fixture
def no_journal_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The journal thread of ``run_sync`` is never made: making it fails the test's task."""

    def refuse() -> None:
        raise AssertionError("a journal thread was made for an awaited agent")

    monkeypatch.setattr(_units, "_Invocation", refuse)


AsyncTool = Callable[[], Coroutine[Any, Any, str]]


def finishing_in_reverse(ledger: Ledger, finished: list[str]) -> list[AsyncTool]:
    """Three async tools: each waits until all three have started (so they can only end if
    they run side by side), and the first asked finishes last."""
    names = [name for name, _ in TOGETHER[0]]
    barrier: list[asyncio.Barrier] = []

    def make(name: str) -> AsyncTool:
        async def tool() -> str:
            ledger.effect(name, "")
            if not barrier:
                barrier.append(asyncio.Barrier(len(names)))
            await asyncio.wait_for(barrier[0].wait(), 5)
            later = names[names.index(name) + 1 :]
            while not set(later) <= set(finished):
                await asyncio.sleep(0.001)
            finished.append(name)
            return name.upper()

        tool.__name__ = name
        return tool

    return [make(name) for name in names]


def test_tools_asked_together_run_side_by_side_keyed_by_the_responses_order(
    make_runtime, no_journal_thread
):
    ledger, finished = Ledger(), []
    agent: Agent[None, str] = Agent(
        scripted_model(ledger, TOGETHER),
        name="support",
        tools=finishing_in_reverse(ledger, finished),
        capabilities=[ContinuumDurability()],
    )
    runtime = make_runtime(awaited_app(agent))
    done = runtime.run("support", {"question": "?"})
    assert done.status == "succeeded", done.error
    assert done.result == OUTPUT
    assert finished == ["third", "second", "first"]  # the reverse of the order asked
    assert step_keys(runtime.record(done.task_id)) == KEYS


def test_a_replay_after_tools_that_finished_in_any_order_matches_each_to_its_own_step(
    make_runtime, no_journal_thread
):
    ledger, finished = Ledger(), []
    agent: Agent[None, str] = Agent(
        scripted_model(ledger, TOGETHER),
        name="support",
        tools=finishing_in_reverse(ledger, finished),
        capabilities=[ContinuumDurability()],
    )
    app = awaited_app(agent)
    runtime = make_runtime(app)
    executed = lambda: len(ledger.requests) + len(ledger.effects)  # noqa: E731
    task_id = app.client().start("support", {"question": "?"})
    # The first invocation runs the first request and the three calls, then suspends before
    # the second request; the next replays the four and sends it.
    record = drain(runtime, task_id, lambda i: ScriptedContext(4 if i == 0 else None, executed))
    assert record.status == Status.SUCCEEDED, record.error
    assert record.result == OUTPUT
    assert record.counters.invocations == 2
    assert ledger.requests == [0, 3]
    assert sorted(ledger.effects) == [("first", ""), ("second", ""), ("third", "")]
    assert step_keys(record) == KEYS


def test_sync_tools_asked_together_run_side_by_side_in_threads(make_runtime, no_journal_thread):
    ledger = Ledger()
    loop_threads: list[int] = []
    tool_threads: list[int] = []
    barrier = threading.Barrier(3, timeout=5)  # broken unless all three run at once

    def make(name: str) -> Callable[[], str]:
        def tool() -> str:
            tool_threads.append(threading.get_ident())
            ledger.effect(name, "")
            barrier.wait()
            time.sleep(0.01 * ["third", "second", "first"].index(name))
            return name.upper()

        tool.__name__ = name
        return tool

    agent: Agent[None, str] = Agent(
        scripted_model(ledger, TOGETHER),
        name="support",
        tools=[make(name) for name, _ in TOGETHER[0]],
        capabilities=[ContinuumDurability()],
    )
    app = Continuum()

    @app.task(state=Chat)
    async def support(ctx: TaskContext[Chat]) -> str:
        loop_threads.append(threading.get_ident())
        return (await agent.run(ctx.state.question)).output

    runtime = make_runtime(app)
    done = runtime.run("support", {"question": "?"})
    assert done.status == "succeeded", done.error
    assert done.result == OUTPUT
    assert len(set(tool_threads)) == 3
    assert not set(tool_threads) & set(loop_threads)
    assert step_keys(runtime.record(done.task_id)) == KEYS


def test_two_agent_runs_gathered_run_side_by_side_with_their_own_ids(make_runtime):
    ledger = Ledger()
    agent: Agent[None, str] = Agent(
        scripted_model(ledger, [[("lookup", {})]]),
        name="support",
        capabilities=[ContinuumDurability()],
    )

    @agent.tool_plain
    async def lookup() -> str:
        ledger.effect("lookup", "")
        await asyncio.sleep(0.01)
        return "found"

    app = Continuum()

    @app.task(state=Chat)
    async def support(ctx: TaskContext[Chat]) -> list[str]:
        first, second = await asyncio.gather(agent.run("a"), agent.run("b"))
        return [first.output, second.output, first.run_id, second.run_id]

    done = make_runtime(app).run("support", {"question": "?"}, task_id="two")
    assert done.status == "succeeded", done.error
    first, second, first_id, second_id = done.result
    assert first == second == "done after 1 tools: lookup=found"
    assert first_id != second_id  # each gathered run's id has its asyncio task's context
    assert first_id.startswith("two:0:")
    assert len(ledger.requests) == 4  # two requests per run, none sent twice
    assert ledger.effects == [("lookup", ""), ("lookup", "")]
