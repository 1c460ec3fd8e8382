"""Agent overhead: what ContinuumDurability costs per model request and per tool call.

The same pydantic-ai agent (a FunctionModel and a tool that do no work, both async, so that
no worker thread of pydantic-ai's adds its own noise) runs without the
capability, and with it inside a continuum task through the real ``TurnLoop`` in memory (a
fake persist, a budget with all the time in the world), so the difference is the durable path
alone: pydantic-ai's durable wrappers, the step call on the journal thread and back, the budget
check, the JSON of each response and each tool result, and the journal. Repeats are
interleaved and the medians compared, side by side in one run:

- per model request: ``RUNS`` runs of one request each (the text answer at once), in one
  turn; (durable - plain) / ``RUNS``, each run's own setup (ids, scopes) included;
- per tool call: one response that calls ``2T`` tools against one that calls ``T`` (then the
  answer: two requests either way); (durable - plain of the first - of the second) / ``T``.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from benchmarks import check, emit, median
from continuum import Continuum, TaskContext
from continuum._define.settings import Settings
from continuum._record.model import TaskRecord
from continuum._steps.budget import Budget
from continuum._turn.loop import Returned, TurnLoop
from continuum.integrations.pydantic_ai import ContinuumDurability


class Question(BaseModel):
    question: str = "?"


def model(rounds: int, tools_per_round: int) -> FunctionModel:
    """Calls ``tools_per_round`` no-op tools per request for ``rounds`` requests, then answers."""

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(1 for m in messages if isinstance(m, ModelResponse))
        if step >= rounds:
            return ModelResponse(parts=[TextPart("done")])
        calls = [
            ToolCallPart("noop", {"i": i}, tool_call_id=f"c{step}.{i}")
            for i in range(tools_per_round)
        ]
        return ModelResponse(parts=calls)

    return FunctionModel(respond, model_name="bench")


def agent(rounds: int, tools_per_round: int, *, durable: bool) -> Agent[None, str]:
    found: Agent[None, str] = Agent(
        model(rounds, tools_per_round),
        name="bench",
        capabilities=[ContinuumDurability()] if durable else [],
    )

    @found.tool_plain
    async def noop(i: int) -> int:
        return i

    return found


def run_plain(plain: Agent[None, str], runs: int) -> float:
    started = time.perf_counter()
    outputs = [plain.run_sync("?").output for _ in range(runs)]
    elapsed = time.perf_counter() - started
    check(outputs == ["done"] * runs, f"the plain agent answered {outputs}")
    return elapsed


def durable_task(durable: Agent[None, str], runs: int) -> Any:
    app = Continuum(bucket="unused", queue_url="unused")

    @app.task(state=Question)
    def ask(ctx: TaskContext[Question]) -> str:
        outputs = [durable.run_sync(ctx.state.question).output for _ in range(runs)]
        return outputs[-1]

    return app.tasks["ask"]


def run_durable(task: Any, steps: int) -> float:
    """Seconds of one run of the durable task, which must journal ``steps`` live steps (each
    model request and each tool call)."""
    record = TaskRecord(task_id="bench", task_name="ask", state={"question": "?"})
    loop = TurnLoop(
        task,
        record,
        Budget(remaining=lambda: 1e9),
        lambda: None,
        Settings(persist_every_s=math.inf),
    )
    started = time.perf_counter()
    outcome = loop.run()
    elapsed = time.perf_counter() - started
    check(isinstance(outcome, Returned) and record.result == "done", f"it ended {outcome!r}")
    counters = record.counters
    check(
        (counters.steps_executed, counters.steps_replayed) == (steps, 0),
        f"the durable agent ran {counters.steps_executed} steps live and replayed "
        f"{counters.steps_replayed}; its requests and tool calls are {steps}",
    )
    return elapsed


def overhead_s(rounds: int, tools: int, runs: int, repeats: int) -> tuple[float, float]:
    """Median seconds (durable - plain) of ``runs`` runs of this shape, and plain's median."""
    plain = agent(rounds, tools, durable=False)
    task = durable_task(agent(rounds, tools, durable=True), runs)
    steps = runs * (rounds + 1 + rounds * tools)  # model requests, then tool calls
    run_plain(plain, runs)  # warm up: adapters, schemas and the event loop are built lazily
    run_durable(task, steps)
    plains, durables = [], []
    for _ in range(repeats):  # interleaved
        plains.append(run_plain(plain, runs))
        durables.append(run_durable(task, steps))
    return median(durables) - median(plains), median(plains)


#: One-request runs per measurement of the model request's overhead.
RUNS = 20
#: Tool calls of the smaller of the two responses compared for the tool call's overhead.
TOOLS = 50


def main(quick: bool = False) -> None:
    runs, tools, repeats = (4, 4, 3) if quick else (RUNS, TOOLS, 21)
    request, request_plain = overhead_s(0, 0, runs, repeats)
    many, many_plain = overhead_s(1, 2 * tools, 1, repeats)
    few, _ = overhead_s(1, tools, 1, repeats)
    emit("agent_overhead.model_request.overhead", 1e6 * request / runs, "us/request")
    emit("agent_overhead.model_request.plain", 1e6 * request_plain / runs, "us/request plain")
    emit("agent_overhead.tool_call.overhead", 1e6 * (many - few) / tools, "us/call")
    emit("agent_overhead.tool_call.plain", 1e6 * many_plain / (2 * tools), "us/call plain")
    emit("agent_overhead.ratio", (many + many_plain) / many_plain, "x plain (tool-heavy run)")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
