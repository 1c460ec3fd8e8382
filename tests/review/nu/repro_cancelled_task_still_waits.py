"""A task cancelled while it waits for a callback still lists that callback, with its link,
in `waiting_for` (status, inspect, TaskHandle), though the link answers 410.

Run: python repro_cancelled_task_still_waits.py
"""

from datetime import timedelta

from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum.testing import TaskRunner

app = Continuum(signing_key="a-test-key", callback_url="https://links.example.test")


class S(BaseModel):
    item: str


@app.task(state=S)
def order(ctx: TaskContext[S]) -> str:
    cb = ctx.create_callback("approval", timeout=timedelta(days=2), request={"title": "Buy?"})
    return "bought" if cb.result()["approved"] else "not bought"


with TaskRunner(app) as runner:
    task = runner.run("order", {"item": "canoe"})
    task.cancel("changed my mind")
    print("status:", task.status.value)
    print("waiting_for:", [(w.kind.value, w.name, w.url) for w in task.waiting_for])
    print("client status waiting_for:", runner.client.status(task.task_id).waiting_for)
