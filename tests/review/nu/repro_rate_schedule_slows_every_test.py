"""An app with a one-minute rate schedule makes every TaskRunner run slow (CPU seconds).

The memory scheduler's next-due lookup lists a whole year of the rate's times (525,600 for
`every=1 minute`) to take the first, at each invocation. Run with and without "sched".
"""

import resource
import sys
from datetime import timedelta

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum.testing import TaskRunner

app = Continuum()


class Report(BaseModel):
    channel: str = "ops"


@app.task(state=Report)
def report(ctx: TaskContext[Report]) -> str:
    ctx.sleep(30)  # a second invocation
    return f"report of {ctx.state.channel}"


if "sched" in sys.argv:
    app.schedule("ops-report", report, every=timedelta(minutes=1), input={"channel": "ops"})


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime  # freezegun does not patch this clock


with TaskRunner(app) as runner:
    before = cpu()
    assert runner.run("report", {"channel": "x"}).result == "report of x"
    print(sys.argv[1:], f"one two-invocation run: {cpu() - before:.2f} CPU s")
