"""A user's own ``freezegun.freeze_time`` (not continuum's virtual clock) around the client's
calls: start, status, signal and result work inside it, in a plain script and in a pytest run
without continuum's plugin (``-p no:continuum``, or ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``).

Each runs in a fresh interpreter (``tests/fresh.py``): this suite's process has long built
every model by the time a test runs, so a model built lazily, for the first time inside the
user's frozen clock, passes here and fails for a user.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fresh import FRESH_TIMEOUT_S, fresh_program, succeeded

#: The user's code: a task that waits for a signal, driven by a TaskRunner on the real clock,
#: and every client call inside the user's own frozen clock.
USERS_CODE = """
import freezegun
from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum.testing import TaskRunner

app = Continuum()


class Order(BaseModel):
    item: str


@app.task(state=Order)
def order(ctx: TaskContext[Order]) -> str:
    signal = ctx.wait_for_signal("go")
    return f"{ctx.state.item}: {signal.payload}"


def frozen_calls() -> list[str]:
    with TaskRunner(app, virtual_time=False) as runner:
        client = runner.client
        with freezegun.freeze_time("2030-01-02 03:04:05"):
            task_id = client.start("order", {"item": "kayak"})
            seen = [client.status(task_id).status.value]
            runner.handle(task_id).run()
            status = client.status(task_id)
            seen += [status.status.value, str(status.created_at)]
            client.signal(task_id, "go", "now")
            runner.handle(task_id).run()
            seen.append(client.result(task_id))
    return seen
"""
EXPECTED = ["pending", "waiting", "2030-01-02 03:04:05+00:00", "kayak: now"]


def test_the_clients_calls_work_inside_a_users_freeze_time_in_a_plain_script() -> None:
    result = fresh_program(USERS_CODE + "\nprint(frozen_calls())\n")
    assert succeeded(result).strip().splitlines()[-1] == repr(EXPECTED)


@pytest.mark.parametrize("plugin", ["with the plugin", "without the plugin"])
def test_the_clients_calls_work_inside_a_users_freeze_time_in_pytest(
    tmp_path: Path, plugin: str
) -> None:
    off = ["-p", "no:continuum"] if plugin == "without the plugin" else []
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_users.py").write_text(
        USERS_CODE
        + textwrap.dedent(
            f"""

            def test_frozen_calls():
                assert frozen_calls() == {EXPECTED!r}
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *off],
        cwd=tmp_path, capture_output=True, text=True, timeout=FRESH_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert "1 passed" in succeeded(result)


def test_freezing_the_clock_leaves_powertools_parser_models_unimported() -> None:
    # freezegun's start reads every module's attributes: the parser's lazy models package
    # would import all of its event models, under the fake datetime.
    result = fresh_program(
        """
        import sys
        import freezegun
        import continuum

        before = set(sys.modules)
        with freezegun.freeze_time("2030-01-02"):
            pass
        print(sorted(m for m in set(sys.modules) - before if "utilities.parser" in m))
        """
    )
    assert succeeded(result).strip() == "[]"


#: An async task whose step awaits asyncio's own sleep, run under the user's frozen clock
#: (freezegun freezes asyncio's loop clock too, unless told ``real_asyncio=True``).
USERS_ASYNC_CODE = """
import asyncio

import freezegun
from pydantic import BaseModel

from continuum import Continuum, TaskContext
from continuum.testing import TaskRunner

app = Continuum()


class Greeting(BaseModel):
    name: str


@app.step
async def greet(name: str) -> str:
    await asyncio.sleep(0.01)
    return f"hi {name}"


@app.task(state=Greeting)
async def hello(ctx: TaskContext[Greeting]) -> str:
    return await greet(ctx.state.name)


with freezegun.freeze_time("2030-06-01 12:00:00"):
    with TaskRunner(app, virtual_time=False, timeout_s=20) as runner:
        print(runner.run("hello", {"name": "ada"}).result)
"""


def test_an_async_task_awaiting_asyncio_sleep_runs_inside_a_users_freeze_time() -> None:
    result = fresh_program(USERS_ASYNC_CODE)
    assert succeeded(result).strip().splitlines()[-1] == "hi ada"
