"""A pydantic-ai agent in a continuum task: each model request and each tool call is one step.

Every count is the test's own (``Ledger``): a model request that finished is never sent again
and a tool call that finished never runs again, however the invocations fall.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from continuum import Status, TaskContext
from continuum.integrations.pydantic_ai import ContinuumDurability, UnitConfig
from tests.conftest import ScriptedContext, drain
from tests.integrations.agents import Chat, Ledger, side_by_side, support_agent, support_app

#: The effects of SCRIPT, in order, and the requests its model answers (by tool results seen).
EFFECTS = [("lookup_order", "A1"), ("check_stock", "tide-pod"), ("lookup_order", "B2")]
REQUESTS = [0, 1, 3]
#: What the model says in a task. A tool's result reaches it as the result's JSON (the Order
#: as a dict), live and on replay alike, as in pydantic-ai's other journal engines.
OUTPUT = (
    "done after 3 tools: lookup_order={'cents': 1250, 'order_id': 'A1', 'status': 'shipped'}; "
    "check_stock={'tide-pod': 7}; "
    "lookup_order={'cents': 1250, 'order_id': 'B2', 'status': 'shipped'}"
)
#: The durable units of SCRIPT: three model requests and three tool calls.
UNITS = len(REQUESTS) + len(EFFECTS)
#: The tool calls of each of SCRIPT's responses (asked together: side by side in an async task).
BATCHES = [1, 2]


def assert_effects(effects: list[tuple[str, str]], engine: str) -> None:
    """Each tool side effect of SCRIPT happened once: in order under ``run_sync``, which runs
    tool calls one at a time; in order of the model's responses under ``run``."""
    if engine == "run_sync":
        assert effects == EFFECTS
    else:
        assert side_by_side(effects, BATCHES) == side_by_side(EFFECTS, BATCHES)


def test_outside_a_task_the_capability_is_transparent():
    ledger = Ledger()
    output = support_agent(ledger).run_sync("where are my orders?").output
    assert output.startswith("done after 3 tools: lookup_order=order_id='A1' cents=1250")
    assert ledger.requests == REQUESTS
    # Outside a task pydantic-ai runs the two tools its second request asked for concurrently.
    assert ledger.effects[0] == EFFECTS[0]
    assert sorted(ledger.effects[1:]) == sorted(EFFECTS[1:])


def test_uninterrupted_in_a_task_each_request_and_tool_call_runs_once(make_runtime, engine):
    ledger = Ledger()
    app = support_app(support_agent(ledger), engine)
    done = make_runtime(app).run("support", {"question": "?"})
    assert (done.status, done.result, done.invocations) == ("succeeded", OUTPUT, 1)
    assert ledger.requests == REQUESTS
    assert_effects(ledger.effects, engine)


def test_with_a_one_second_budget_each_model_request_and_tool_side_effect_happens_once(
    make_runtime, engine
):
    ledger = Ledger()
    app = support_app(support_agent(ledger, pause_s=0.3), engine)
    runtime = make_runtime(app, budget_s=1.0)
    done = runtime.run("support", {"question": "where are my orders?"})
    assert done.status == "succeeded", done.error
    assert done.result == OUTPUT
    assert done.invocations >= 3
    assert done.steps_replayed > 0
    assert ledger.requests == REQUESTS  # each request once: none repeated after a suspension
    assert_effects(ledger.effects, engine)  # each tool side effect once


@pytest.mark.parametrize("before", range(UNITS))
def test_a_suspension_before_any_one_unit_gives_the_same_final_output(make_runtime, engine, before):
    ledger = Ledger()
    app = support_app(support_agent(ledger), engine)
    runtime = make_runtime(app)
    executed = lambda: len(ledger.requests) + len(ledger.effects)  # noqa: E731
    task_id = app.client().start("support", {"question": "where are my orders?"})
    record = drain(
        runtime, task_id, lambda i: ScriptedContext(before if i == 0 else None, executed)
    )
    assert record.status == Status.SUCCEEDED
    assert record.result == OUTPUT
    assert record.counters.continuations >= 1
    assert ledger.requests == REQUESTS
    assert_effects(ledger.effects, engine)


def test_a_suspension_at_every_unit_one_at_a_time_gives_the_same_final_output(make_runtime, engine):
    ledger = Ledger()
    app = support_app(support_agent(ledger), engine)
    runtime = make_runtime(app)
    executed = lambda: len(ledger.requests) + len(ledger.effects)  # noqa: E731
    task_id = app.client().start("support", {"question": "where are my orders?"})
    record = drain(runtime, task_id, lambda i: ScriptedContext(1, executed))
    assert record.status == Status.SUCCEEDED
    assert record.result == OUTPUT
    if engine == "run_sync":
        assert record.counters.invocations == UNITS
    else:
        # The two calls asked together start side by side: the second's budget check may come
        # before the first's side effect (one invocation for both) or after it (one each).
        assert record.counters.invocations in (UNITS - 1, UNITS)
    assert ledger.requests == REQUESTS
    assert_effects(ledger.effects, engine)


def test_step_names_are_the_stable_operation_names_and_durations_are_learned_per_tool(
    make_runtime, engine
):
    """The names are compatibility data: a change strands suspended tasks. Pinned here."""
    app = support_app(support_agent(Ledger()), engine)
    runtime = make_runtime(app)
    done = runtime.run("support", {"question": "where are my orders?"})
    stats = runtime.record(done.task_id).step_stats
    assert {name: s.count for name, s in stats.items()} == {
        "support__model.request": 3,
        "support__function_toolset__<agent>.call_tool:lookup_order": 2,
        "support__function_toolset__<agent>.call_tool:check_stock": 1,
    }


def test_run_ids_are_the_same_on_replay_and_differ_between_runs(make_runtime, engine):
    ledger = Ledger()
    agent = support_agent(ledger)
    app = support_app(agent, engine)

    if engine == "run_sync":

        @app.task(state=Chat)
        def two_runs(ctx: TaskContext[Chat]) -> list[str]:
            first = agent.run_sync(ctx.state.question)
            second = agent.run_sync(ctx.state.question)
            return [first.run_id, first.conversation_id, second.run_id]

    else:

        @app.task(state=Chat, name="two_runs")
        async def two_runs_async(ctx: TaskContext[Chat]) -> list[str]:
            first = await agent.run(ctx.state.question)
            second = await agent.run(ctx.state.question)
            return [first.run_id, first.conversation_id, second.run_id]

    runtime = make_runtime(app)
    executed = lambda: len(ledger.requests) + len(ledger.effects)  # noqa: E731
    task_id = app.client().start("two_runs", {"question": "where?"}, task_id="ids-1")
    record = drain(runtime, task_id, lambda i: ScriptedContext(2, executed))
    assert record.counters.continuations >= 5
    first, conversation, second = record.result
    assert (first, second) == ("ids-1:0:0", "ids-1:0:1")
    assert conversation != first


def test_a_tool_with_continuum_false_metadata_runs_outside_any_step(make_runtime, engine):
    ledger = Ledger()
    agent = support_agent(ledger, script=[[("ping", {})]])

    @agent.tool_plain(metadata={"continuum": False})
    def ping() -> str:
        ledger.effects.append(("ping", ""))
        return "pong"

    runtime = make_runtime(support_app(agent, engine))
    done = runtime.run("support", {"question": "ping"})
    assert done.result == "done after 1 tools: ping=pong"
    assert set(runtime.record(done.task_id).step_stats) == {"support__model.request"}


def test_tool_step_options_come_from_metadata_and_bad_metadata_is_named(make_runtime, engine):
    ledger = Ledger()
    agent = support_agent(ledger, script=[[("flaky", {})]])
    attempts: list[int] = []

    @agent.tool_plain(metadata={"continuum": {"retries": 2, "backoff_s": 0.01}})
    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("try again")
        return "third time"

    done = make_runtime(support_app(agent, engine)).run("support", {"question": "?"})
    assert done.result == "done after 1 tools: flaky=third time"
    assert len(attempts) == 3

    bad = support_agent(Ledger(), script=[[("odd", {})]])

    @bad.tool_plain(metadata={"continuum": {"retires": 2}})
    def odd() -> str:
        return "odd"

    failed = make_runtime(support_app(bad, engine)).run("support", {"question": "?"})
    assert failed.status == "failed"
    assert "tool 'odd' has invalid 'continuum' metadata" in failed.error
    assert "retires" in failed.error


def test_a_failed_model_request_fails_the_task_naming_its_step(make_runtime, engine):
    def broken(messages: Any, info: Any) -> Any:
        raise RuntimeError("the model is down")

    from pydantic_ai.models.function import FunctionModel

    agent: Agent[None, str] = Agent(
        FunctionModel(broken),
        name="support",
        capabilities=[ContinuumDurability(model_step=UnitConfig(retries=1, backoff_s=0.01))],
    )
    done = make_runtime(support_app(agent, engine)).run("support", {"question": "?"})
    assert done.status == "failed"
    assert "step raised RuntimeError: the model is down" in done.error


class Remote(AbstractToolset[None]):
    """A leaf toolset continuum cannot journal (as an MCP server's would be)."""

    @property
    def id(self) -> str:
        return "remote"

    async def get_tools(self, ctx: Any) -> dict[str, Any]:
        return {}

    async def call_tool(self, name: str, tool_args: Any, ctx: Any, tool: Any) -> Any:
        raise AssertionError("never called")


def test_a_toolset_continuum_cannot_journal_is_refused_when_the_agent_is_built():
    with pytest.raises(UserError, match=r"cannot journal the calls of toolset .*Remote"):
        Agent("test", name="support", toolsets=[Remote()], capabilities=[ContinuumDurability()])


def test_a_toolset_added_per_run_inside_a_task_fails_the_task_saying_why(make_runtime, engine):
    agent = support_agent(Ledger())
    app = support_app(agent, engine)

    if engine == "run_sync":

        @app.task(state=Chat)
        def extra(ctx: TaskContext[Chat]) -> str:
            late = FunctionToolset(id="late")
            return agent.run_sync(ctx.state.question, toolsets=[late]).output

    else:

        @app.task(state=Chat, name="extra")
        async def extra_async(ctx: TaskContext[Chat]) -> str:
            late = FunctionToolset(id="late")
            return (await agent.run(ctx.state.question, toolsets=[late])).output

    done = make_runtime(app).run("extra", {"question": "?"})
    assert done.status == "failed"
    assert "cannot be added at runtime with continuum" in done.error


def test_the_core_package_does_not_import_pydantic_ai():
    code = "import sys, continuum, continuum._local.runtime; print('pydantic_ai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_streamed_run_is_one_step_per_request_and_replays_from_the_journal(make_runtime, engine):
    sent: list[int] = []

    async def stream(messages: Any, info: Any) -> Any:
        sent.append(1)
        for word in ("hello ", "world"):
            yield word

    from pydantic_ai.models.function import FunctionModel

    agent: Agent[None, str] = Agent(
        FunctionModel(stream_function=stream), name="streamer", capabilities=[ContinuumDurability()]
    )
    app = support_app(agent, engine)

    if engine == "run_sync":

        @app.task(state=Chat)
        def streamed(ctx: TaskContext[Chat]) -> list[str]:
            with agent.run_stream_sync(ctx.state.question) as run:
                text = "".join(run.stream_text(delta=True))
            ctx.step(print, key="after")  # a later step: the turn suspends before it, and replays
            return [text]

    else:

        @app.task(state=Chat, name="streamed")
        async def streamed_async(ctx: TaskContext[Chat]) -> list[str]:
            async with agent.run_stream(ctx.state.question) as run:
                text = "".join([delta async for delta in run.stream_text(delta=True)])
            await ctx.step_async(print, key="after")  # the turn suspends before it, and replays
            return [text]

    runtime = make_runtime(app)
    task_id = app.client().start("streamed", {"question": "?"})
    record = drain(runtime, task_id, lambda i: ScriptedContext(1, lambda: len(sent)))
    assert record.result == ["hello world"]
    assert record.counters.continuations == 1
    assert len(sent) == 1  # the replay read the streamed response from the journal
    assert record.step_stats["streamer__model.request_stream"].count == 1
