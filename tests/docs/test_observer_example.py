"""operating.md's ``Spans`` observer is right when steps run at the same time: the steps of
``ctx.map`` items run in pool threads, and each span must end once, with its own outcome."""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel
from pytest_examples import EvalExample, find_examples

from continuum import Continuum, TaskContext
from continuum.testing import TaskRunner
from tests.fresh import ROOT


class RecordingSpan:
    def __init__(self, name: str) -> None:
        self.name = name
        self.attributes: dict[str, Any] = {}
        self.ends = 0

    def set_attribute(self, name: str, value: Any) -> None:
        self.attributes[name] = value

    def end(self) -> None:
        self.ends += 1


class RecordingTracer:
    def __init__(self) -> None:
        self.spans: list[RecordingSpan] = []

    def start_span(self, name: str, attributes: dict[str, Any] | None = None) -> RecordingSpan:
        span = RecordingSpan(name)
        self.spans.append(span)
        return span


class Empty(BaseModel):
    pass


def test_the_spans_observer_of_operating_md_ends_each_span_of_concurrent_steps_once(
    eval_example: EvalExample,
) -> None:
    (example,) = [
        ex
        for ex in find_examples(ROOT / "docs" / "operating.md")
        if "class Spans(Observer)" in ex.source
    ]
    tracer, app = RecordingTracer(), Continuum()
    spans = eval_example.run(example, module_globals={"tracer": tracer, "app": app})["Spans"]
    both_started = threading.Barrier(2, timeout=10)

    @app.step
    def check(number: int) -> int:
        both_started.wait()  # both items' steps have started before either ends
        if number == 2:
            raise ValueError("two is refused")
        return number

    def item(ctx: TaskContext[Empty], number: int, index: int) -> int:
        try:
            return check(number)
        except Exception:
            return -1

    @app.task(state=Empty)
    def checks(ctx: TaskContext[Empty]) -> list[int]:
        return ctx.map([1, 2], item, name="checks", max_concurrency=2).values()

    app.observe(spans())
    with TaskRunner(app) as runner:
        assert runner.run("checks", {}).result == [1, -1]
    ended = {span.name: (span.ends, span.attributes.get("outcome")) for span in tracer.spans}
    assert ended == {"checks#0/0/check#0": (1, "ok"), "checks#0/1/check#0": (1, "failed")}
