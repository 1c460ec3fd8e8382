"""``continuum dev`` serves callback links on its pages' port, as the stack's link function
does: the page, the form's answer, a webhook's JSON, and the same refusals."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from pydantic import BaseModel

from continuum import Continuum, Status, TaskContext
from continuum._local.runtime import LocalRuntime
from continuum._waits.link_endpoint import LinkEndpoint
from continuum.timeline.server import TimelineServer
from tests.timeline.test_dev_pages import get, post


class Ask(BaseModel):
    what: str = "deploy <b>v2</b>"


def test_dev_pages_serve_callback_links(quiet):
    app = Continuum(signing_key="dev-key")

    @app.task(state=Ask)
    def ask(ctx: TaskContext[Ask]) -> Any:
        return ctx.create_callback("go", timeout=600, request={"what": ctx.state.what}).result()

    runtime = LocalRuntime(app, budget_s=5, backend="memory", virtual_time=True)
    with runtime.time.running():
        links = LinkEndpoint.of(app)
        with TimelineServer(app.client(), links=links) as server:
            app.update_settings(callback_url=server.url.rstrip("/"))
            waiting = runtime.run("ask", {})
            [waiter] = app.client().status(waiting.task_id).waiting_for
            assert waiter.url is not None
            assert waiter.url.startswith(server.url + "cb/")
            status, page = get(waiter.url)
            assert status == 200
            assert "deploy &lt;b&gt;v2&lt;/b&gt;" in page
            assert waiting.task_id in page
            assert get(waiter.url[:-3] + "AAA")[0] == 403
            done, said, _ = post(waiter.url, {"decision": "deny", "comment": "not today"})
            assert done == 200, said
            assert "denied" in said
            again = urllib.request.Request(
                waiter.url,
                data=json.dumps({"late": True}).encode(),
                method="POST",
                headers={"Content-Type": "application/json"},
            )
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(again, timeout=10)
            assert refused.value.code == 409
            refused.value.close()
            finished = runtime.drive(waiting.task_id)
    assert finished.status == Status.SUCCEEDED
    assert finished.result == {"approved": False, "comment": "not today"}
