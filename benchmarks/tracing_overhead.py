"""Tracing overhead: what ``Tracing`` adds to a step, side by side with the same loop untraced.

The task of ``step_overhead`` (no-op steps, ``STEPS_PER_TURN`` a turn) runs through the real
``TurnLoop`` in memory, once with no observer and once with
``continuum.integrations.opentelemetry.Tracing`` on an SDK ``TracerProvider`` whose span
processor hands each span to an ``InMemorySpanExporter`` (so the figure counts making and
ending the spans, not a network export, which a ``BatchSpanProcessor`` does on its own
thread). Repeats are interleaved and the medians of CPU time (``time.process_time``: what
other jobs on a shared machine take is not counted) reported, in microseconds per step. Each
traced run, the simplest observer's and the SDK's own loop must have made a step span and an
attempt span for every step, of one shape among the three (the same attribute names, number
of links, parent and status), and the untraced run none, or the figure is ``Mismeasured``.
"""

from __future__ import annotations

import gc
import math
import time
from typing import Any

from benchmarks import check, emit, median
from benchmarks.step_overhead import STEPS_PER_TURN, build
from continuum._base.clock import now_s
from continuum._define.events import InvocationEnded, InvocationStarted
from continuum._define.observers import Observers
from continuum._define.settings import Settings
from continuum._record.model import TaskRecord
from continuum._steps.budget import Budget
from continuum._turn.loop import Returned, TurnLoop

#: Where the benchmark's task's records would live: its trace ids derive from it.
STACK = "memory/tasks"


def tracing() -> tuple[Observers, Any]:
    """Observers holding a Tracing on a provider of its own, and that provider's exporter."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from continuum.integrations.opentelemetry import Tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observers = Observers()

    class Quiet:  # the log keys: Powertools' logger is not what this measures
        def append_keys(self, **keys: Any) -> None: ...

        def remove_keys(self, keys: list[str]) -> None: ...

    observers.add(Tracing(tracer_provider=provider, logger=Quiet()))
    return observers, exporter


def direct() -> tuple[Observers, Any]:
    """Observers holding the simplest observer that makes the same two spans a step straight
    on the SDK (random ids, no derived ids, no log keys, no open spans): the SDK's own cost of
    those spans, paid in the same loop as ``Tracing``'s."""
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Link, Status, StatusCode

    from continuum._define.observers import Observer

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    ok = Status(StatusCode.OK)
    common = {"continuum.task.id": "bench", "continuum.task.name": "spin"}

    class DirectSpans(Observer):
        def invocation_started(self, event: InvocationStarted) -> None:
            self.invocation = tracer.start_span("invocation", attributes=common)
            self.root = trace.set_span_in_context(self.invocation, Context())
            self.link = [Link(self.invocation.get_span_context(), {"continuum.link": "x"})]

        def step_started(self, event: Any) -> None:
            at = int(event.started_at * 1e9)
            self.step = tracer.start_span(
                event.name, self.root, attributes=common, links=self.link, start_time=at
            )
            self.attempt = tracer.start_span(
                f"{event.name} attempt {event.attempt}",
                trace.set_span_in_context(self.step, Context()),
                attributes={
                    **common,
                    "continuum.step.key": event.key,
                    "continuum.step.name": event.name,
                    "continuum.attempt.number": event.attempt,
                    "continuum.step.replay": event.replay,
                },
                links=self.link,
                start_time=at,
            )

        def step_ended(self, event: Any) -> None:
            at = int(event.ended_at * 1e9)
            self.attempt.set_attribute("continuum.attempt.outcome", event.outcome)
            self.attempt.set_status(ok)
            self.attempt.end(end_time=at)
            for name, value in (
                ("continuum.step.key", event.key),
                ("continuum.step.name", event.name),
                ("continuum.step.attempts", event.attempt),
                ("continuum.step.outcome", event.outcome),
            ):
                self.step.set_attribute(name, value)
            self.step.set_status(ok)
            self.step.end(end_time=at)

        def invocation_ended(self, event: InvocationEnded) -> None:
            self.invocation.end()

    observers = Observers()
    observers.add(DirectSpans())
    return observers, exporter


def run(task: Any, steps: int, observers: Observers | None) -> float:
    """Seconds of one invocation of the task, which runs ``steps`` steps live."""
    record = TaskRecord(task_id="bench", task_name="spin", state={})
    loop = TurnLoop(
        task,
        record,
        Budget(remaining=lambda: 1e9),
        lambda: None,
        Settings(persist_every_s=math.inf),
        observers=observers,
    )
    gc.disable()  # as timeit does: a collection's cost follows the heap, not the work
    started = time.process_time()
    if observers is not None:
        now = now_s()
        observers.emit(
            "invocation_started",
            InvocationStarted(
                "bench", "spin", 0, 0, "start", True, 1, "req", now, now, stack=STACK
            ),
        )
    outcome = loop.run()
    if observers is not None:
        ended = InvocationEnded("bench", "spin", "succeeded", 0.0, steps, 0, 1, "req", now, now_s())
        observers.emit("invocation_ended", ended)
    elapsed = time.process_time() - started
    gc.enable()
    check(isinstance(outcome, Returned), f"the task ended {outcome!r}")
    check(record.counters.steps_executed == steps, "not every step ran live")
    return elapsed


def main(quick: bool = False) -> None:
    turns, repeats = (5, 3) if quick else (50, 9)
    task, _ = build(turns, STEPS_PER_TURN)
    steps = turns * STEPS_PER_TURN
    observers, exporter = tracing()
    simplest, its_exporter = direct()
    run(task, steps, None)  # warm up
    run(task, steps, observers)
    run(task, steps, simplest)
    plain, traced, by_sdk, sdk_same, sdk_bare = [], [], [], [], []
    for _ in range(repeats):  # interleaved, the SDK's own spans too
        exporter.clear()
        its_exporter.clear()
        gc.collect()
        by_sdk.append(run(task, steps, simplest))
        seconds, sdk_spans = sdk_step_s(steps, rounds=1)
        sdk_same.append(seconds)
        sdk_bare.append(sdk_span_s(steps, rounds=1))
        plain.append(run(task, steps, None))
        check(not exporter.get_finished_spans(), "the untraced run made spans")
        traced.append(run(task, steps, observers))
        # The three make the same spans, as many: else the ratios compare different work.
        shapes = step_shapes(exporter.get_finished_spans(), steps, "Tracing")
        simplest_spans = its_exporter.get_finished_spans()
        check(
            shapes == step_shapes(simplest_spans, steps, "the simplest observer"),
            "the simplest observer's spans are not Tracing's",
        )
        check(
            shapes == step_shapes(sdk_spans, steps, "the SDK's loop"),
            "the SDK loop's spans are not Tracing's",
        )
    without, with_tracing = 1e6 * median(plain) / steps, 1e6 * median(traced) / steps
    added, sdk = with_tracing - without, 1e6 * median(sdk_same)
    emit("tracing_overhead.without_tracing", without, "us/step")
    emit("tracing_overhead.with_tracing", with_tracing, "us/step")
    emit("tracing_overhead.added", added, "us/step")
    # The same spans made by the simplest observer straight on the SDK, in the same loop:
    # the ratio is what Tracing's model (derived ids, log keys, spans held until a write)
    # costs beyond them, less what making each span at once, when it is sent, saves.
    simplest_added = 1e6 * median(by_sdk) / steps - without
    emit("tracing_overhead.sdk_observer_added", simplest_added, "us/step")
    emit("tracing_overhead.ratio_to_sdk_observer", added / simplest_added, "x")
    # The SDK's own cost of the same two spans a step (the step and its attempt, with the
    # same attributes, parent, link, times and status), made directly: what tracing must
    # cost at least; the ratio is what continuum's bookkeeping adds on top.
    emit("tracing_overhead.sdk_spans", sdk, "us/step")
    emit("tracing_overhead.ratio_to_sdk", added / sdk, "x")
    # The bare span of earlier runs (two attributes and a link, no parent, times or status):
    # the floor, kept so that figures compare across sessions.
    bare = 1e6 * median(sdk_bare)
    emit("tracing_overhead.sdk_span", bare, "us/span")
    emit("tracing_overhead.ratio_to_bare_spans", added / (2 * bare), "x")


#: What makes a span cost what it costs: its attribute names, its number of links, whether it
#: has a parent and its status.
Shape = tuple[tuple[str, ...], int, bool, str]


def step_shapes(spans: Any, steps: int, maker: str) -> dict[str, Shape]:
    """The shape of a step's span and of its attempt's among ``spans``, which must hold one of
    each for each of ``steps`` steps, all of one shape (else ``Mismeasured``)."""
    shapes: dict[str, set[Shape]] = {"noop": set(), "noop attempt 1": set()}
    counts = dict.fromkeys(shapes, 0)
    for span in spans:
        if span.name in shapes:
            counts[span.name] += 1
            attributes = tuple(sorted(span.attributes or {}))
            has_parent = span.parent is not None
            status = span.status.status_code.name
            shapes[span.name].add((attributes, len(span.links), has_parent, status))
    made = tuple(counts.values())
    check(made == (steps, steps), f"{maker} made {made} step and attempt spans for {steps} steps")
    check(all(len(s) == 1 for s in shapes.values()), f"{maker}'s step spans differ: {shapes}")
    return {name: found.pop() for name, found in shapes.items()}


def sdk_span_s(count: int, rounds: int = 5) -> float:
    """Median seconds to start and end one span with attributes and a link on an SDK tracer
    with the same processor and exporter."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Link

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    link = [Link(tracer.start_span("invocation").get_span_context())]
    attributes = {"continuum.task.id": "bench", "continuum.step.key": "noop#0"}
    times = []
    for _ in range(rounds):
        gc.disable()
        started = time.process_time()
        for _ in range(count):
            tracer.start_span("noop", attributes=attributes, links=link).end()
        times.append((time.process_time() - started) / count)
        gc.enable()
    check(len(exporter.get_finished_spans()) == rounds * count, "the SDK did not end every span")
    return median(times)


def sdk_step_s(count: int, rounds: int = 5) -> tuple[float, Any]:
    """Median seconds to make a step's two spans directly on an SDK tracer with the same
    processor and exporter: a step span under a given parent and an attempt span under it,
    each with the attributes, link, start and end times and status that ``Tracing`` gives;
    and the spans of the last round."""
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Link, Status, StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    invocation = tracer.start_span("invocation")
    root = trace.set_span_in_context(invocation, Context())
    link = [Link(invocation.get_span_context(), {"continuum.link": "invocation"})]
    common = {"continuum.task.id": "bench", "continuum.task.name": "spin"}
    ok = Status(StatusCode.OK)
    times = []
    for _ in range(rounds):
        gc.disable()
        started = time.process_time()
        for i in range(count):
            now = time.time_ns()
            step_attributes: dict[str, Any] = {
                **common,
                "continuum.step.key": f"noop#{i}",
                "continuum.step.name": "noop",
                "continuum.step.attempts": 1,
                "continuum.step.outcome": "ok",
            }
            step = tracer.start_span(
                "noop", root, attributes=step_attributes, links=link, start_time=now
            )
            attempt_attributes: dict[str, Any] = {
                **common,
                "continuum.step.key": f"noop#{i}",
                "continuum.step.name": "noop",
                "continuum.attempt.number": 1,
                "continuum.step.replay": False,
            }
            attempt = tracer.start_span(
                "noop attempt 1",
                trace.set_span_in_context(step, Context()),
                attributes=attempt_attributes,
                links=link,
                start_time=now,
            )
            attempt.set_attribute("continuum.attempt.outcome", "ok")
            attempt.set_status(ok)
            attempt.end(end_time=now)
            step.set_status(ok)
            step.end(end_time=now)
        times.append((time.process_time() - started) / count)
        gc.enable()
    spans = exporter.get_finished_spans()
    check(len(spans) == 2 * rounds * count, "the SDK did not end every span")
    return median(times), spans[-2 * count :]


if __name__ == "__main__":
    import sys

    main(quick="--quick" in sys.argv)
