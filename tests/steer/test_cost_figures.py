"""What ``continuum cost`` says a task cost when a worker outside Lambda ran it (``continuum
worker``, ``continuum dev``): its billed milliseconds are priced, and the figure is readable."""

from __future__ import annotations

import re
import threading
import time

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum._local.shutdown import Shutdown
from continuum._local.standalone import QueueSource, QueueWorker
from continuum._ops.inspection import inspect_task
from continuum._ops.prices import PRICES, money
from continuum.cli.steer import cost_text
from continuum.testing import InMemoryContinuationQueue, InMemoryRecordStore

ARN = "arn:aws:sqs:us-east-1:123456789012:continuations"


class Naps(BaseModel):
    n: int = 3
    done: int = 0


def worked_task() -> tuple[Continuum, str]:
    queue = InMemoryContinuationQueue()
    app = Continuum(store=InMemoryRecordStore(), queue=queue)

    @app.step
    def nap(i: int) -> int:
        time.sleep(0.1)
        return i + 1

    @app.task(state=Naps)
    def naps(ctx: TaskContext[Naps]) -> int:
        while ctx.state.done < ctx.state.n:
            ctx.state.done = nap(ctx.state.done)
        return ctx.state.done

    task_id = app.client().start("naps", {})
    shutdown = Shutdown()
    source = QueueSource("continuations", queue, ARN, app.handler, 60, slots=1)
    worker = QueueWorker([source], shutdown=shutdown, poll_wait_s=0)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not app.client().status(task_id).status.finished:
        assert time.monotonic() < deadline, "the task did not finish"
        time.sleep(0.01)
    shutdown.begin(grace_s=3, reason="test")
    thread.join(5)
    return app, task_id


def test_a_task_run_by_a_local_worker_is_priced_for_its_billed_milliseconds():
    app, task_id = worked_task()
    view = inspect_task(app.client().records, task_id, versions=0)
    usage = view.usage
    assert usage.lambda_ms >= 300
    requests = usage.invocations * PRICES.lambda_request
    assert usage.gb_ms > 0
    assert view.cost["lambda"] > 10 * requests  # the compute, not the requests alone
    compute = usage.gb_ms / 1000 * PRICES.lambda_gb_s
    assert abs(view.cost["lambda"] - (requests + compute)) < 1e-8


def test_the_cost_line_shows_each_figure_to_three_significant_digits():
    app, task_id = worked_task()
    view = inspect_task(app.client().records, task_id, versions=0)
    text = cost_text(view)
    shown = float(re.search(r"Lambda \$([0-9.e-]+)", text).group(1))
    assert shown > 0
    assert abs(shown - view.cost["lambda"]) <= 0.005 * view.cost["lambda"]
    assert f"{usage_ms(view)} ms billed" in text


def usage_ms(view) -> int:
    return view.usage.lambda_ms


def test_money_keeps_three_significant_digits_and_no_exponent():
    assert money(0.0) == "$0"
    assert money(0.0000176) == "$0.0000176"
    assert money(0.0123456) == "$0.0123"
    assert money(1.5) == "$1.50"
    assert money(1234.5) == "$1234.50"
