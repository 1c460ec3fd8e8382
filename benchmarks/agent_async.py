"""The async agent engine: what ContinuumDurability costs per model request and per tool call
when the agent is awaited in an async task, beside the plain agent and the ``run_sync`` engine;
and a turn whose model asks for three slow tool calls at once, live and on replay.

Overheads (as ``agent_overhead``, the same no-op FunctionModel and tool, all async so that no
worker thread of pydantic-ai's adds its noise): each engine's durable run through the real
``TurnLoop`` in memory, minus the same plain agent run the same way (``await agent.run`` on a
fresh event loop for the async engine, ``run_sync`` for the ``run_sync`` engine): medians,
over interleaved repeats, of the differences of runs measured side by side. They are CPU
seconds of the process (every thread of it: the ``run_sync`` engine's journal thread too), so
that other work on the machine moves them less:

- per model request: ``RUNS`` runs of one request each, in one turn; the difference / ``RUNS``;
- per tool call: one response that calls ``2T`` tools against one that calls ``T`` (then the
  answer); the difference of the differences / ``T``.

Split: the async engine's run again with each unit's body awaited in place of its step (no
step call, no journal entry) costs pydantic-ai's own durable path (its wrappers of the model
and the toolsets, the run's durable scopes, the JSON of each unit), which any engine pays, and
the child contexts of the asyncio tasks pydantic-ai makes; the rest is what the steps cost
(budget check, timing, the journal entry), ``tool_call.step_calls`` per step (a request's one
step is below the noise of a whole run's setup, so no such figure is given for it).

Side by side: one response asks for three tools that each take ``SLOW_S`` (an ``await
asyncio.sleep``, as I/O would); the turn's wall time live (the three run side by side: about
``SLOW_S``, not three times it) and on replay (the next invocation reads the five units from
the journal: about nothing). It checks that the three calls overlapped, that each request and
each call was one live step, and that the replay ran none of them again.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from benchmarks import check, emit, median
from benchmarks.agent_overhead import agent, durable_task, model
from continuum import Continuum, TaskContext
from continuum._define.settings import Settings
from continuum._record.model import TaskRecord
from continuum._steps.budget import Budget
from continuum._turn.loop import Returned, Suspended, TurnLoop
from continuum.integrations.pydantic_ai import ContinuumDurability
from continuum.integrations.pydantic_ai._operations import ContinuumOperationBackend


class Question(BaseModel):
    question: str = "?"


def run_plain_async(plain: Agent[None, str], runs: int) -> float:
    """CPU seconds of ``runs`` awaited runs of the plain agent on a fresh event loop (as an
    async task's invocation makes one)."""

    async def many() -> list[str]:
        return [(await plain.run("?")).output for _ in range(runs)]

    started = time.process_time()
    outputs = asyncio.run(many())
    elapsed = time.process_time() - started
    check(outputs == ["done"] * runs, f"the plain agent answered {outputs}")
    return elapsed


def run_plain(plain: Agent[None, str], runs: int) -> float:
    """CPU seconds of ``runs`` runs of the plain agent with ``run_sync``."""
    started = time.process_time()
    outputs = [plain.run_sync("?").output for _ in range(runs)]
    elapsed = time.process_time() - started
    check(outputs == ["done"] * runs, f"the plain agent answered {outputs}")
    return elapsed


def run_durable(task: Any, steps: int) -> float:
    """CPU seconds of one run of the durable task, which must journal ``steps`` live steps
    (each model request and each tool call)."""
    record = TaskRecord(task_id="bench", task_name="ask", state={"question": "?"})
    loop = TurnLoop(
        task,
        record,
        Budget(remaining=lambda: 1e9),
        lambda: None,
        Settings(persist_every_s=math.inf),
    )
    started = time.process_time()
    outcome = loop.run()
    elapsed = time.process_time() - started
    check(isinstance(outcome, Returned) and record.result == "done", f"it ended {outcome!r}")
    counters = record.counters
    check(
        (counters.steps_executed, counters.steps_replayed) == (steps, 0),
        f"the durable agent ran {counters.steps_executed} steps live and replayed "
        f"{counters.steps_replayed}; its requests and tool calls are {steps}",
    )
    return elapsed


class _InPlace(ContinuumOperationBackend):
    """Awaits each unit's body in place of its step: pydantic-ai's durable path alone."""

    async def execute(self, *, body: Any, **unit: Any) -> object:
        return await body()


class _InPlaceDurability(ContinuumDurability[None]):
    def get_durable_operation_backend(self) -> ContinuumOperationBackend:
        return _InPlace(agent_name=self.name, default_model_id=None, config=self._config)


def bench_agent(rounds: int, tools: int, durability: ContinuumDurability[None]) -> Agent[None, str]:
    """``agent_overhead``'s agent, with ``durability``."""
    found: Agent[None, str] = Agent(model(rounds, tools), name="bench", capabilities=[durability])

    @found.tool_plain
    async def noop(i: int) -> int:
        return i

    return found


def awaited_task(durable: Agent[None, str], runs: int) -> Any:
    app = Continuum(bucket="unused", queue_url="unused")

    @app.task(state=Question)
    async def ask(ctx: TaskContext[Question]) -> str:
        outputs = [(await durable.run(ctx.state.question)).output for _ in range(runs)]
        return outputs[-1]

    return app.tasks["ask"]


class Shape:
    """Median CPU seconds of ``runs`` runs of one shape, per way to run it."""

    def __init__(self, rounds: int, tools: int, runs: int, repeats: int) -> None:
        plain = agent(rounds, tools, durable=False)
        awaited = awaited_task(bench_agent(rounds, tools, ContinuumDurability()), runs)
        unjournaled = awaited_task(bench_agent(rounds, tools, _InPlaceDurability()), runs)
        synced = durable_task(agent(rounds, tools, durable=True), runs)
        steps = runs * (rounds + 1 + rounds * tools)  # model requests, then tool calls
        ways = {
            "awaited": lambda: run_durable(awaited, steps),
            "in_place": lambda: run_durable(unjournaled, 0),
            "plain_async": lambda: run_plain_async(plain, runs),
            "synced": lambda: run_durable(synced, steps),
            "plain_sync": lambda: run_plain(plain, runs),
        }
        for way in ways.values():  # warm up: adapters, schemas and loops are built lazily
            way()
        found: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(repeats):  # interleaved
            for name, way in ways.items():
                found[name].append(way())

        def paired(way: str, baseline: str) -> float:
            """The median of the repeats' differences (each pair measured side by side)."""
            return median(a - b for a, b in zip(found[way], found[baseline], strict=True))

        self.plain_async = median(found["plain_async"])
        self.plain_sync = median(found["plain_sync"])
        #: the async engine's overhead, and the share of it that is not the step calls.
        self.awaited = paired("awaited", "plain_async")
        self.durable_exec = paired("in_place", "plain_async")
        #: the step calls' share: the same run with and without them.
        self.step_calls = paired("awaited", "in_place")
        #: the run_sync engine's overhead.
        self.synced = paired("synced", "plain_sync")


# -- three slow tool calls asked together ---------------------------------------------------------

#: Seconds each of the three tool calls takes.
SLOW_S = 0.5
SLOW_TOOLS = 3


class SideBySide:
    """An async task whose model asks for three slow tools at once, and what really ran."""

    def __init__(self) -> None:
        self.requests = 0
        self.calls: list[tuple[float, float]] = []

        async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.requests += 1
            if not any(isinstance(m, ModelResponse) for m in messages):
                return ModelResponse(
                    parts=[
                        ToolCallPart("slow", {"i": i}, tool_call_id=f"slow-{i}")
                        for i in range(SLOW_TOOLS)
                    ]
                )
            return ModelResponse(parts=[TextPart("done")])

        durable: Agent[None, str] = Agent(
            FunctionModel(respond, model_name="bench"),
            name="bench",
            capabilities=[ContinuumDurability()],
        )

        @durable.tool_plain
        async def slow(i: int) -> int:
            started = time.perf_counter()
            await asyncio.sleep(SLOW_S)
            self.calls.append((started, time.perf_counter()))
            return i

        async def finish(output: str) -> str:
            return output

        app = Continuum(bucket="unused", queue_url="unused")

        @app.task(state=Question)
        async def ask(ctx: TaskContext[Question]) -> str:
            output = (await durable.run(ctx.state.question)).output
            # A step after the agent's: the live turn suspends before it, the next replays.
            await ctx.step_async(finish, output)
            return output

        self.task = app.tasks["ask"]

    @property
    def units(self) -> int:
        return self.requests + len(self.calls)

    def turns_s(self) -> tuple[float, float]:
        """Seconds of the live turn (it suspends after the agent's units) and of the replay."""
        record = TaskRecord(task_id="bench", task_name="ask", state={"question": "?"})
        units = 2 + SLOW_TOOLS
        budget = Budget(remaining=lambda: 1e9 if self.units < units else 0.0)
        live = TurnLoop(self.task, record, budget, lambda: None, Settings(persist_every_s=math.inf))
        started = time.perf_counter()
        outcome = live.run()
        live_s = time.perf_counter() - started
        check(isinstance(outcome, Suspended), f"the live turn ended {outcome!r}")
        counters = record.counters
        check(
            (counters.steps_executed, self.requests, len(self.calls)) == (units, 2, SLOW_TOOLS),
            f"the live turn ran {counters.steps_executed} steps, {self.requests} requests and "
            f"{len(self.calls)} tool calls; expected {units}, 2 and {SLOW_TOOLS}",
        )
        starts, ends = zip(*self.calls, strict=True)
        check(
            max(starts) < min(ends),
            f"the {SLOW_TOOLS} tool calls did not overlap: {self.calls}",
        )
        replay = TurnLoop(
            self.task,
            record,
            Budget(remaining=lambda: 1e9),
            lambda: None,
            Settings(persist_every_s=math.inf),
        )
        started = time.perf_counter()
        outcome = replay.run()
        replay_s = time.perf_counter() - started
        check(
            isinstance(outcome, Returned) and record.result == "done",
            f"the replay ended {outcome!r}",
        )
        check(
            (record.counters.steps_replayed, self.units) == (units, units),
            f"the replay replayed {record.counters.steps_replayed} steps and the agent's units "
            f"ran {self.units} times; expected {units} and {units}",
        )
        return live_s, replay_s


#: One-request runs per measurement of the model request's overhead.
RUNS = 20
#: Tool calls of the smaller of the two responses compared for the tool call's overhead.
TOOLS = 50


def main(quick: bool = False) -> None:
    runs, tools, repeats, slow_repeats = (4, 4, 3, 1) if quick else (RUNS, TOOLS, 21, 5)
    request = Shape(0, 0, runs, repeats)
    many, few = Shape(1, 2 * tools, 1, repeats), Shape(1, tools, 1, repeats)
    per_request = 1e6 / runs
    emit("agent_async.model_request.overhead", per_request * request.awaited, "us/request")
    emit(
        "agent_async.model_request.durable_path",
        per_request * request.durable_exec,
        "us/request of it pydantic-ai's durable path and the asyncio tasks' contexts",
    )
    emit("agent_async.model_request.plain", per_request * request.plain_async, "us/request plain")
    emit(
        "agent_async.model_request.run_sync_overhead",
        per_request * request.synced,
        "us/request (run_sync engine)",
    )
    emit(
        "agent_async.model_request.run_sync_plain",
        per_request * request.plain_sync,
        "us/request plain run_sync",
    )
    per_call = 1e6 / tools
    emit("agent_async.tool_call.overhead", per_call * (many.awaited - few.awaited), "us/call")
    emit(
        "agent_async.tool_call.step_calls",
        per_call * (many.step_calls - few.step_calls),
        "us/call of it the step calls",
    )
    emit("agent_async.tool_call.plain", 1e6 * many.plain_async / (2 * tools), "us/call plain")
    emit(
        "agent_async.tool_call.run_sync_overhead",
        per_call * (many.synced - few.synced),
        "us/call (run_sync engine)",
    )
    lives, replays = [], []
    for _ in range(slow_repeats):
        live_s, replay_s = SideBySide().turns_s()
        lives.append(live_s)
        replays.append(replay_s)
    emit("agent_async.side_by_side.live_turn", median(lives), f"s ({SLOW_TOOLS} x {SLOW_S} s)")
    emit("agent_async.side_by_side.replay_turn", median(replays), "s")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
