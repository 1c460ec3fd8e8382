"""Where a task failed, when the failure came from inside a child context, an item of a batch
or a child task: the record names the step by its path from the task and keeps the traceback
of the code that raised (its last frames, without locals)."""

from __future__ import annotations

from pydantic import BaseModel

from continuum import Continuum, TaskContext


class Empty(BaseModel):
    pass


def parsing_app() -> Continuum:
    app = Continuum()

    @app.step
    def parse(text: str) -> int:
        return int(text)

    def block(ctx: TaskContext[Empty], text: str) -> int:
        return parse(text)

    def nested(ctx: TaskContext[Empty], text: str) -> int:
        return ctx.child_context(block, text, name="inner")

    def item(ctx: TaskContext[Empty], text: str, index: int) -> int:
        return parse(text)

    @app.task(state=Empty)
    def in_block(ctx: TaskContext[Empty]) -> int:
        return ctx.child_context(block, "zwei", name="blk")

    @app.task(state=Empty)
    def in_nested_block(ctx: TaskContext[Empty]) -> int:
        return ctx.child_context(nested, "zwei", name="outer")

    @app.task(state=Empty)
    def in_item(ctx: TaskContext[Empty]) -> list[int]:
        return ctx.map(["1", "zwei"], item, name="parse_all").values()

    @app.task(state=Empty)
    def child(ctx: TaskContext[Empty]) -> int:
        return parse("drei")

    @app.task(state=Empty)
    def in_child_task(ctx: TaskContext[Empty]) -> int:
        return ctx.invoke("child", {})

    return app


def failed(make_runtime, task: str):
    app = parsing_app()
    runtime = make_runtime(app)
    with runtime.time.running():
        done = runtime.run(task, {})
    status = app.client().status(done.task_id)
    assert status.status.value == "failed"
    assert status.error is not None
    return status.error


def test_a_step_failing_in_a_child_context_is_named_by_its_path(make_runtime):
    error = failed(make_runtime, "in_block")
    assert error.step == "blk#0/parse#0"
    assert "return int(text)" in error.traceback


def test_a_step_failing_in_a_nested_child_context_is_named_by_its_whole_path(make_runtime):
    error = failed(make_runtime, "in_nested_block")
    assert error.step == "outer#0/inner#0/parse#0"


def test_a_failed_item_names_its_step_and_keeps_its_traceback(make_runtime):
    error = failed(make_runtime, "in_item")
    assert error.type == "BatchError"
    assert error.step == "parse_all#0/1/parse#0"
    assert "return int(text)" in error.traceback
    assert "ValueError" in error.traceback


def test_a_failed_child_task_passes_its_traceback_to_its_parent(make_runtime):
    error = failed(make_runtime, "in_child_task")
    assert error.type == "ChildTaskError"
    assert "return int(text)" in error.traceback
    assert "'drei'" in error.traceback
