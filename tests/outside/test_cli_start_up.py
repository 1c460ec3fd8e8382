"""A command loads what it uses: ``continuum --help`` and the commands that read a record do
not load the worker, the local runtime or Powertools (the timings are benchmarks/cli_start.py's).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.outside.processes import ROOT, base_env, cli, dev_stack

LOADED = """
import sys
from continuum.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = ("continuum._worker.worker", "continuum._worker.sqs_batch", "continuum._local.runtime",
         "continuum._app.app", "aws_lambda_powertools", "pydantic_ai", "moto")
print(json.dumps(sorted(m for m in sys.modules if m.startswith(heavy))), file=sys.stderr)
"""


def loaded_by(*argv: str, env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + LOADED, *argv], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return json.loads(done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("command", [["--help"], ["worker", "--help"], ["run", "--help"]])
def test_help_loads_no_runtime(command):
    assert loaded_by(*command, env=base_env()) == []


def test_status_list_and_inspect_load_no_worker_and_no_app():
    with dev_stack() as (_stack, env):
        env = {**env, "CONTINUUM_APP": "tests.outside.ledger_app:app"}
        started = cli("start", "count", "--input", '{"n": 1, "ledger": "/dev/null"}', env=env)
        task_id = started.stdout.strip()
        for command in (["status", task_id], ["list"], ["inspect", task_id]):
            assert loaded_by(*command, env=env) == [], command
