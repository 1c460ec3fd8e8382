"""Every continuum command ends in one line or quietly, never in a traceback, in a process of
its own: a bad value names what is allowed, and a reader that stops early (``| head``) ends the
command as it ends other Unix tools."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from continuum._record.model import Status
from tests.outside.processes import ROOT, cli, dev_stack


@pytest.fixture(scope="module")
def stack_env() -> Iterator[tuple[dict[str, str], str]]:
    """A dev stack's environment, and a pending task on it."""
    with dev_stack() as (_stack, env):
        app_env = {**env, "CONTINUUM_APP": "tests.outside.ledger_app:app"}
        started = cli("start", "count", "--input", '{"n": 1, "ledger": "/dev/null"}', env=app_env)
        assert started.returncode == 0, started.stderr
        yield env, started.stdout.strip()


def closed_reader(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``continuum ARGS | head -0``: the reader of its stdout is gone before it writes."""
    with subprocess.Popen(
        [sys.executable, "-m", "continuum.cli", *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as process:  # fmt: skip
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdout.close()
        err = process.stderr.read()
        code = process.wait(60)
    return subprocess.CompletedProcess(process.args, code, "", err)


def test_listing_by_a_status_that_does_not_exist_names_the_statuses_that_do(stack_env):
    env, _ = stack_env
    done = cli("list", "--status", "bogus", env=env)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert "'bogus'" in line
    for status in Status:
        assert status.value in line


def test_listing_by_a_status_that_exists_lists_its_tasks(stack_env):
    env, task_id = stack_env
    done = cli("list", "--status", "pending", "--json", env=env)
    assert done.returncode == 0, done.stderr
    listed = [json.loads(line) for line in done.stdout.splitlines()]
    # Dev stacks in one process share moto's state: another test's pending task may be there.
    assert task_id in [summary["task_id"] for summary in listed]
    assert {summary["status"] for summary in listed} == {"pending"}


@pytest.mark.parametrize(
    "command", [["status"], ["inspect"], ["inspect", "--json"], ["cost"], ["list"]]
)
def test_a_reader_that_stops_early_ends_the_command_quietly(stack_env, command):
    env, task_id = stack_env
    args = [*command, task_id] if command[0] != "list" else command
    done = closed_reader(*args, env=env)
    assert done.stderr == ""
    assert done.returncode != 0  # as a tool killed by SIGPIPE: the shell sees it failed


def test_a_negative_count_of_versions_to_inspect_is_refused_in_one_line(stack_env):
    env, task_id = stack_env
    done = cli("inspect", task_id, "--versions", "-5", env=env)
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "argument --versions: must be zero or a positive whole number, got '-5'" in line


def test_what_a_task_wrote_is_shown_on_a_terminal_not_obeyed(capsys):
    """An error, a result or a traceback holding escape sequences (a line erased, the
    clipboard written) prints them as escapes: the error line still reads as the error."""
    from continuum.cli.run_output import print_result

    print_result(
        "failed", "t-1", "\x1b]52;c;aGk=\x07done", "boom\x1b[2K\rtask ok", "Traceback\x1b[1A\n"
    )
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "\r" not in out
    assert "error: boom\\x1b[2K\\x0dtask ok" in out


def test_cancel_says_in_a_whole_sentence_when_the_task_ends_and_where_to_see_it(stack_env):
    env, _ = stack_env
    app_env = {**env, "CONTINUUM_APP": "tests.outside.ledger_app:app"}
    started = cli("start", "count", "--input", '{"n": 1, "ledger": "/dev/null"}', env=app_env)
    task_id = started.stdout.strip()
    done = cli("cancel", task_id, "--reason", "not needed", env=app_env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"asked {task_id} to cancel (it sees the request at its next step, wait or turn); "
        f"`continuum status {task_id}` shows when it has ended\n"
    )
