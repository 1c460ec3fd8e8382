"""Every shell command the README, CONTRIBUTING.md and docs/ show runs, as shown, on the installed
wheel.

Each command runs in a fresh process (bash), in the copy of the checkout where the README's
install block built and installed the wheel (tests/fresh.py), with that venv activated. A
placeholder the docs leave to the reader (``TASK_ID``) is the id the command before printed;
``continuum dev`` gets ``--port 0`` (a free port), its only change.

What cannot run here is listed once, below, with the reason: ``NOT_RUN_BLOCKS`` and
``NOT_RUN_COMMANDS``. ``test_every_shell_command_of_the_docs_runs_or_is_listed_as_not_run``
fails for a command of the docs that is neither run by a test here nor listed.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fresh import (
    README,
    ROOT,
    Installed,
    fenced_blocks,
    readme_install_block,
)

pytestmark = pytest.mark.slow

DOCS = [README, ROOT / "CONTRIBUTING.md", *sorted(ROOT.glob("docs/**/*.md"))]

#: A block of the docs (by its first line) that cannot run here, and why.
NOT_RUN_BLOCKS = {
    "cd infra": "sam build needs the AWS SAM CLI (no dependency of continuum) and sam deploy an "
    "AWS account; make -f infra/build.mk, what sam build runs for this template, is run by "
    "tests/test_template.py::test_build_packages_only_the_lambda_code",
    'eval "$(aws cloudformation describe-stacks': "needs a deployed stack on AWS; the same "
    "continuum commands run against continuum dev here (test_your_own_project_...)",
    "aws ssm put-parameter": "needs an AWS account",
    "sam ": "the AWS SAM CLI is no dependency of continuum, and sam deploy needs an AWS account",
    "make chaos": "minutes long: make chaos and make bench are their own targets (make bench's "
    "quick mode runs in tests/test_benchmarks_smoke.py); benchmarks.versus checks out old "
    "revisions",
    "continuum schedules sync": "needs a stack's schedule group (EventBridge Scheduler); "
    "tests/schedules/test_cli.py runs every schedules command as shown, on moto",
    "continuum ui": "serves until Ctrl-C; tests/timeline/test_ui_command.py runs it against a "
    "stack on a moto server and uses its pages in Chromium",
    "make bench": "minutes long, as make chaos above; benchmarks.versus checks out old revisions",
    'curl "$URL"': "needs a task waiting for a callback on continuum dev, with its link; "
    "tests/outside/test_dev_links.py runs this block as shown against one",
}
#: A command of a block run here that cannot run here itself, and why.
NOT_RUN_COMMANDS = {
    "make test": "it is the run this test is part of",
    "continuum retry TASK_ID": "takes a failed task, and the dev stack's word_count succeeded; "
    "tests/steer/test_history.py runs retry through the CLI",
    "continuum fork TASK_ID --at VERSION": "takes a checkpoint's VERSION id; "
    "tests/steer/test_history.py runs fork through the CLI",
}

INSTALL = "python3 -m venv .venv && . .venv/bin/activate"  # tests/fresh.py runs it
DEMO = "make demo"
RUN_JSON = ".venv/bin/continuum run samples.research_agent:research"
APPROVAL = ".venv/bin/continuum run samples.approval_agent:publish"
TEAM = ".venv/bin/continuum run samples.research_team:lead"
SUPPORT = ".venv/bin/continuum run samples.support_agent:support"
PROJECT = "continuum init my-agent"
DEV_START = "continuum start word_count"
INSPECT_HTML = "continuum inspect TASK_ID --html timeline.html"
OPERATE = "continuum list --status failed --since 6h"
#: The blocks (by their first line) that the tests below run; DEMO's block in part.
RUN_HERE = [INSTALL, DEMO, RUN_JSON, APPROVAL, TEAM, SUPPORT, PROJECT, DEV_START, INSPECT_HTML,
            OPERATE]  # fmt: skip


def commands(block: str) -> list[str]:
    """The block's commands: continued lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", "", block)
    lines = (re.sub(r"\s+#\s.*$", "", line).strip() for line in joined.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def all_blocks() -> Iterator[tuple[str, int, list[str]]]:
    for path in DOCS:
        for line, text in fenced_blocks(path):
            yield path.name, line, commands(text)


def block(start: str) -> list[str]:
    """The commands of the docs' block that starts with ``start`` (one of RUN_HERE)."""
    assert start in RUN_HERE
    found = [cmds for _, _, cmds in all_blocks() if cmds[0].startswith(start)]
    assert len(found) >= 1, f"no block of the docs starts with {start!r}"
    assert all(f == found[0] for f in found), f"blocks starting {start!r} differ"
    return found[0]


def test_every_shell_command_of_the_docs_runs_or_is_listed_as_not_run() -> None:
    unaccounted = []
    for name, line, cmds in all_blocks():
        if any(cmds[0].startswith(start) for start in NOT_RUN_BLOCKS):
            continue
        assert any(cmds[0].startswith(start) for start in RUN_HERE), (
            f"{name}:{line}: a shell block that no test runs: {cmds[0]!r}; run it in "
            "tests/docs/test_docs_commands.py, or list it in NOT_RUN_BLOCKS saying why"
        )
        if cmds[0].startswith(DEMO):
            unaccounted += [c for c in cmds[1:] if c not in NOT_RUN_COMMANDS]
    assert not unaccounted, unaccounted
    listed = [c for _, _, cmds in all_blocks() for c in cmds]
    assert [c for c in NOT_RUN_COMMANDS if not any(x.startswith(c) for x in listed)] == []


def test_the_install_block_is_the_readmes_wherever_the_docs_show_it() -> None:
    # tests/fresh.py runs the README's; a page showing another would show what no test ran.
    assert block(INSTALL) == commands(readme_install_block())


def ok(result: subprocess.CompletedProcess[str], command: str) -> str:
    assert result.returncode == 0, f"{command!r} exited {result.returncode}:\n" + (
        result.stdout + result.stderr
    )
    return result.stdout


def last_json(stdout: str) -> dict[str, object]:
    line = stdout.strip().splitlines()[-1]
    loaded: dict[str, object] = json.loads(line)
    return loaded


def test_make_demo_runs_the_sample_agent_on_the_installed_wheel(installed: Installed) -> None:
    (demo, *_) = block(DEMO)
    # The README's install block made this .venv: make's own (editable) install is not redone.
    stdout = ok(installed.sh(f"touch .venv/.installed-run && {demo}", timeout=300), demo)
    assert "succeeded" in stdout


def test_any_task_runs_and_ends_with_its_json_line(installed: Installed) -> None:
    (command,) = block(RUN_JSON)
    summary = last_json(ok(installed.sh(command), command))
    assert summary["status"] == "succeeded"
    for key in ("task_id", "result", "invocations", "steps", "steps_replayed"):
        assert key in summary
    assert isinstance(summary["continuations"], int)
    assert summary["continuations"] > 0  # a 3 s budget: it continues


def test_the_approval_sample_waits_and_is_approved_in_one_command(installed: Installed) -> None:
    (command,) = block(APPROVAL)
    stdout = ok(installed.sh(command), command)
    assert "succeeded" in stdout


def test_the_research_team_fans_out_and_merges(installed: Installed) -> None:
    (command,) = block(TEAM)
    stdout = ok(installed.sh(command), command)
    assert "succeeded" in stdout
    assert "Report on tides" in stdout


def test_the_support_agent_asks_for_its_refund_then_is_approved(installed: Installed) -> None:
    asks, approved = (cmds[0] for _, _, cmds in all_blocks() if cmds[0].startswith(SUPPORT))
    waiting = installed.sh(asks)
    assert waiting.returncode == 3, waiting.stdout + waiting.stderr  # it waits: no answer given
    assert "approve.issue_refund" in waiting.stdout
    stdout = ok(installed.sh(approved), approved)
    assert "succeeded" in stdout


class Background:
    """A command of the docs that runs until stopped (continuum dev), its output in a file."""

    def __init__(self, installed: Installed, command: str, cwd: Path) -> None:
        self.out = cwd / "background.out"
        self._file = self.out.open("w")
        self.process = subprocess.Popen(
            ["bash", "-c", f"exec {command}"], cwd=cwd, env=installed.env(),
            stdout=self._file, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def wait_for(self, pattern: str, timeout: float = 120) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found := re.search(pattern, self.out.read_text(), re.M):
                return found
            assert self.process.poll() is None, self.out.read_text()
            time.sleep(0.2)
        raise AssertionError(f"no {pattern!r} in:\n{self.out.read_text()}")

    def stop(self) -> int:
        self.process.send_signal(signal.SIGINT)  # Ctrl-C, as the README says
        try:
            return self.process.wait(30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self._file.close()


def test_your_own_project_from_init_to_dev_start_status_inspect_and_operate(
    installed: Installed, tmp_path: Path
) -> None:
    *setup, dev = block(PROJECT)
    assert dev.startswith("continuum dev ")
    cwd = tmp_path
    for command in setup:
        if command.startswith("cd "):
            cwd = cwd / command.removeprefix("cd ")
            continue
        ok(installed.sh(command, cwd, timeout=600), command)
    # The one change to a command: a free port, never one that another run (or you) holds.
    server = Background(installed, f"{dev} --port 0", cwd)
    try:
        exports = dict(
            pair.split("=", 1) for pair in shlex.split(server.wait_for(r"^\s+export (.*)$")[1])
        )
        task_id = ""

        def run(command: str) -> str:
            filled = command.replace("TASK_ID", task_id)
            return ok(installed.sh(filled, cwd, timeout=120, **exports), filled)

        start, status, follow = block(DEV_START)
        task_id = run(start).strip().splitlines()[-1]
        deadline = time.monotonic() + 120
        while "succeeded" not in (shown := run(status)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "succeeded" in shown
        assert "succeeded" in run(follow)
        (html,) = block(INSPECT_HTML)
        assert f"wrote timeline.html: the timeline of {task_id}" in run(html)
        assert "<html" in (cwd / "timeline.html").read_text().lower()
        for command in block(OPERATE):
            if not any(command.startswith(c) for c in NOT_RUN_COMMANDS):
                run(command)
    finally:
        assert server.stop() in (0, -signal.SIGINT, 130), server.out.read_text()
