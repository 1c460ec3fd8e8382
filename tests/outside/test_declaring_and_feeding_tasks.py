"""Mistakes a user makes first: a task declared without a state model (or with something that
is not one) is refused where it is declared, naming the fix; a JSON flag too large for a
command line is read from a file (``@FILE``) or from standard input (``-``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from continuum import ConfigurationError, Continuum, TaskContext
from tests.outside.processes import ROOT, base_env, cli, dev_stack


def test_a_task_declared_without_a_state_says_it_needs_one_and_how():
    app = Continuum()
    with pytest.raises(ConfigurationError) as bare:

        @app.task
        def research(ctx: TaskContext) -> str:
            return "done"

    assert "task 'research' has no state model" in str(bare.value)
    assert "@app.task(state=MyState)" in str(bare.value)
    with pytest.raises(ConfigurationError, match="task 'summary' has no state model"):

        @app.task()
        def summary(ctx: TaskContext) -> str:
            return "done"


@pytest.mark.parametrize("state", [dict, "Research", int])
def test_a_task_whose_state_is_not_a_pydantic_model_is_refused_where_it_is_declared(state):
    app = Continuum()
    with pytest.raises(ConfigurationError) as refused:

        @app.task(state=state, name="research")
        def research(ctx: TaskContext) -> str:
            return "done"

    assert f"task 'research' has state={state!r}, which is not a pydantic model class" in str(
        refused.value
    )
    assert "class MyState(BaseModel)" in str(refused.value)


def test_an_app_that_declares_a_task_without_state_fails_its_import_naming_it(tmp_path):
    (tmp_path / "bare_app.py").write_text(
        "from continuum import Continuum\n"
        "app = Continuum()\n"
        "@app.task\n"
        "def research(ctx):\n"
        "    return 'done'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", "import bare_app"], cwd=tmp_path, capture_output=True,
        text=True, check=False, env=base_env(PYTHONPATH=f"{ROOT}:{tmp_path}"),
    )  # fmt: skip
    assert "ConfigurationError: task 'research' has no state model" in done.stderr
    assert "takes 1 positional argument" not in done.stderr


@pytest.mark.slow  # a dev stack or worker in subprocesses: seconds each
def test_input_payload_and_result_are_read_from_a_file_or_standard_input(tmp_path):
    big = {"n": 1, "ledger": str(tmp_path / "ledger"), "notes": ["x" * 1000] * 300}
    source = tmp_path / "input.json"
    source.write_text(json.dumps(big))
    with dev_stack() as (_stack, env):
        env = {**env, "CONTINUUM_APP": "tests.outside.ledger_app:app"}
        from_file = cli("start", "count", "--input", f"@{source}", env=env)
        assert from_file.returncode == 0, from_file.stderr
        from_stdin = subprocess.run(
            [sys.executable, "-m", "continuum.cli", "start", "count", "--input", "-"],
            input=json.dumps(big), cwd=ROOT, env=env, capture_output=True, text=True,
            check=False, timeout=60,
        )  # fmt: skip
        assert from_stdin.returncode == 0, from_stdin.stderr
        task_id = from_stdin.stdout.strip()
        (tmp_path / "payload.json").write_text('{"why": "a file"}')
        signalled = cli("signal", task_id, "nudge", "--payload", f"@{tmp_path / 'payload.json'}",
                        env=env)  # fmt: skip
        assert signalled.returncode == 0, signalled.stderr

        missing = cli("start", "count", "--input", "@nowhere.json", env=env)
        assert missing.returncode == 2
        assert missing.stderr == (
            "error: --input @nowhere.json: cannot read nowhere.json: No such file or directory\n"
        )
        (tmp_path / "bad.json").write_text("{not json")
        bad = cli("callback", "complete", "cb-1", "--result", f"@{tmp_path / 'bad.json'}", env=env)
        assert bad.returncode == 2
        assert bad.stderr.startswith(f"error: --result @{tmp_path / 'bad.json'} is not valid JSON")


@pytest.mark.parametrize(
    ("command", "flag"),
    [(["start", "t"], "--input"), (["run", "m:t"], "--input"),
     (["signal", "id", "n"], "--payload"), (["callback", "complete", "id"], "--result")],
)  # fmt: skip
def test_every_json_flag_says_it_takes_a_file_or_standard_input(command, flag):
    text = cli(*command[:1], *(["complete"] if command[0] == "callback" else []), "--help",
               env=base_env()).stdout  # fmt: skip
    assert "@FILE reads it from a file, - from standard input" in " ".join(text.split()), flag


def test_a_json_file_that_is_not_utf8_is_a_one_line_error(tmp_path):
    """A shell's redirect on Windows writes UTF-16: a clear error, no traceback."""
    from continuum.cli.common import CliError, parse_input

    source = tmp_path / "input.json"
    source.write_text('{"n": 1}', encoding="utf-16")
    with pytest.raises(CliError, match="is not UTF-8 text"):
        parse_input(f"@{source}")
